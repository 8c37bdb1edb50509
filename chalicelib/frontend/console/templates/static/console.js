// DMQ console: live refresh of the part of a page marked data-live, and a confirmation
// before forms marked data-confirm are posted. Everything works without it, but for the
// live updates.
(function () {
  "use strict";
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });
  var live = document.querySelector("[data-live]");
  if (!live) { return; }
  var every = Number(live.getAttribute("data-every")) || 5000;
  var status = document.getElementById("live-status");
  var toggle = document.getElementById("live-toggle");
  var paused = false;
  var timer = null;
  function schedule() { timer = window.setTimeout(refresh, every); }
  function refresh() {
    timer = null;
    // Replacing the part a keyboard user is in would lose their place: wait till they leave.
    if (live.contains(document.activeElement) && document.activeElement !== live) {
      schedule();
      return;
    }
    fetch(live.getAttribute("data-live"), { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        live.setAttribute("data-refreshed", String(Date.now()));
        if (status) { status.textContent = "Live: updated " + new Date().toLocaleTimeString() + "."; }
      })
      .catch(function (error) {
        if (status) { status.textContent = "Live: the last update failed (" + error.message + "); retrying."; }
      })
      .then(function () { if (!paused) { schedule(); } });
  }
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.setAttribute("aria-pressed", String(paused));
      toggle.textContent = paused ? "Resume live updates" : "Pause live updates";
      if (paused && timer !== null) { window.clearTimeout(timer); timer = null; }
      if (!paused && timer === null) { refresh(); }
      if (status && paused) { status.textContent = "Live: paused."; }
    });
  }
  schedule();
})();
