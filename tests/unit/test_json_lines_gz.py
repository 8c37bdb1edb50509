"""GIVEN rows WHEN they are compressed as JSON lines a row at a time (the full exports'
parts) or all at once (the archive) THEN the files hold the same text and read back as the
rows, in order."""

from __future__ import annotations

import gzip
import json

from chalicelib.backend.archive import JsonLinesGz, json_lines_gz


def test_rows_written_one_at_a_time_read_back_as_all_at_once() -> None:
    rows = [{"Item": {"pk": {"S": f"q#{n % 7}"}, "sk": {"S": f"m{n:05d}"},
                      "n": {"N": str(n)}, "body_sha256": {"S": "ab" * 32}}}
            for n in range(5_000)]
    streamed = JsonLinesGz()
    for row in rows:
        streamed.add(row)
    data = streamed.finish()
    assert streamed.rows == len(rows)
    assert gzip.decompress(data) == gzip.decompress(json_lines_gz(rows))
    assert [json.loads(line) for line in gzip.decompress(data).splitlines()] == rows


def test_no_rows_is_an_empty_gzip_file() -> None:
    empty = JsonLinesGz()
    assert gzip.decompress(empty.finish()) == b""
    assert empty.rows == 0
