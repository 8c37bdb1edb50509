/* Loaded into DynamoDB Local only (LD_PRELOAD). Three jobs:
 *
 * 1. Loopback only. DynamoDB Local has no option for its bind address and listens on
 *    every interface. Here bind() turns a wildcard address into loopback (0.0.0.0 into
 *    127.0.0.1, :: into ::ffff:127.0.0.1, which a dual-stack socket serves for IPv4
 *    clients), so DMQ's store is never reachable from the network.
 *
 * 2. Syncs once a second. Its SQLite store calls fsync on every write, about 20 ms each
 *    on an ordinary disk. With DMQ_NOSYNC=1 in its environment, fsync and fdatasync do
 *    nothing, and DMQ syncs the database files itself once a second instead
 *    (dmqlocal/dynamodb_local.py): a crash of either process loses nothing, a power cut
 *    at most the last second. DMQ_DYNAMODB_LOCAL_SYNC=always leaves fsync alone.
 *
 * 3. Indexes the stream records by stream. DynamoDB Local keeps every table's stream
 *    records in one SQLite table, `us`, keyed by sequence number only. Every request to
 *    a table with a stream (each GetItem, Query or write: it checks the table, and a
 *    write adds a record) describes that stream, and the description asks for
 *    `SELECT MIN(SequenceNumber) FROM us WHERE StreamID=?`: without an index a walk
 *    from the oldest record to the stream's first one, so the whole table for a stream
 *    whose records came late or that has none. A request then cost time in proportion
 *    to the stream records of the last 24 hours, about 40 ms at 30,000, on the one
 *    thread that does all of DynamoDB Local's SQLite work. Here sqlite4java's own calls
 *    to sqlite3_open_v2 and sqlite3_step are wrapped: right after a database is opened
 *    (an existing file) and right after DynamoDB Local creates `us` (a new one), the
 *    index below is created if it is missing. SQLite keeps it up to date on every
 *    insert and trim; DynamoDB Local's own statements do not change. Any failure here
 *    leaves DynamoDB Local as it was, only slower. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*sync_fn)(int);

int bind(int fd, const struct sockaddr *address, socklen_t length) {
    static bind_fn real_bind;
    if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (address && address->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in local;
        memcpy(&local, address, sizeof local);
        if (local.sin_addr.s_addr == htonl(INADDR_ANY)) {
            local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&local, sizeof local);
        }
    }
    if (address && address->sa_family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 local;
        memcpy(&local, address, sizeof local);
        if (memcmp(&local.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
            static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                     0xff, 0xff, 127, 0, 0, 1};
            memcpy(&local.sin6_addr, mapped, sizeof mapped);
            return real_bind(fd, (const struct sockaddr *)&local, sizeof local);
        }
    }
    return real_bind(fd, address, length);
}

static int syncs_off(void) {
    const char *value = getenv("DMQ_NOSYNC");
    return value && strcmp(value, "1") == 0;
}

int fsync(int fd) {
    static sync_fn real_fsync;
    if (syncs_off()) return 0;
    if (!real_fsync) real_fsync = (sync_fn)dlsym(RTLD_NEXT, "fsync");
    return real_fsync(fd);
}

int fdatasync(int fd) {
    static sync_fn real_fdatasync;
    if (syncs_off()) return 0;
    if (!real_fdatasync) real_fdatasync = (sync_fn)dlsym(RTLD_NEXT, "fdatasync");
    return real_fdatasync(fd);
}

/* Job 3. sqlite4java loads its native library with dlopen, privately, so the real
 * functions are looked up in the library that called: the caller's return address
 * names it (dladdr), and dlsym on a handle searches that object itself, not this one. */
typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef int (*open_fn)(const char *, sqlite3 **, int, const char *);
typedef int (*step_fn)(sqlite3_stmt *);
typedef const char *(*sql_fn)(sqlite3_stmt *);
typedef sqlite3 *(*db_handle_fn)(sqlite3_stmt *);
typedef int (*exec_fn)(sqlite3 *, const char *, void *, void *, char **);

#define DMQ_SQLITE_OK 0
#define DMQ_SQLITE_DONE 101
#define DMQ_SQLITE_ERROR 1

static const char STREAM_INDEX[] =
    "CREATE INDEX IF NOT EXISTS dmq_stream_records ON us (StreamID, SequenceNumber);";
static const char CREATES_RECORDS[] = "CREATE TABLE IF NOT EXISTS us ";

static void *caller_symbol(const void *caller, const char *name) {
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname) return NULL;
    void *library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!library) return NULL;
    void *symbol = dlsym(library, name);
    dlclose(library); /* NOLOAD took a reference; the library stays loaded */
    return symbol;
}

static exec_fn real_exec;

static void index_stream_records(sqlite3 *db) {
    if (db && real_exec) real_exec(db, STREAM_INDEX, NULL, NULL, NULL);
}

int sqlite3_open_v2(const char *name, sqlite3 **db, int flags, const char *vfs) {
    const void *caller = __builtin_return_address(0);
    /* Opened rarely (once per database): looked up each time, no shared state. */
    open_fn real_open = (open_fn)caller_symbol(caller, "sqlite3_open_v2");
    if (!real_open) return DMQ_SQLITE_ERROR;
    if (!real_exec) real_exec = (exec_fn)caller_symbol(caller, "sqlite3_exec");
    int result = real_open(name, db, flags, vfs);
    /* A new database has no `us` yet: the statement fails and changes nothing. */
    if (result == DMQ_SQLITE_OK && db) index_stream_records(*db);
    return result;
}

int sqlite3_step(sqlite3_stmt *statement) {
    static step_fn real_step;
    static sql_fn real_sql;
    static db_handle_fn real_db_handle;
    step_fn step = __atomic_load_n(&real_step, __ATOMIC_ACQUIRE);
    if (!step) {
        /* Looked up again by a thread that races this one: the same values. The others
         * are stored before real_step is published. */
        const void *caller = __builtin_return_address(0);
        real_sql = (sql_fn)caller_symbol(caller, "sqlite3_sql");
        real_db_handle = (db_handle_fn)caller_symbol(caller, "sqlite3_db_handle");
        if (!real_exec) real_exec = (exec_fn)caller_symbol(caller, "sqlite3_exec");
        step = (step_fn)caller_symbol(caller, "sqlite3_step");
        if (!step) return DMQ_SQLITE_ERROR;
        __atomic_store_n(&real_step, step, __ATOMIC_RELEASE);
    }
    int result = step(statement);
    if (result == DMQ_SQLITE_DONE && real_sql && real_db_handle) {
        const char *sql = real_sql(statement);
        if (sql && strncmp(sql, CREATES_RECORDS, sizeof CREATES_RECORDS - 1) == 0)
            index_stream_records(real_db_handle(statement));
    }
    return result;
}
