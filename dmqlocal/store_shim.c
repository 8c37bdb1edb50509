/* Loaded into DynamoDB Local only (LD_PRELOAD). Four jobs:
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
 *    index below is created if it is missing, and a second one by shard: GetRecords
 *    asks for the shard's oldest record, another walk over every record before the
 *    shard's first; and a third by time, for the trim of records older than 24 hours
 *    (at each start: a walk over every record, about 0.5 s at 300,000 and the better
 *    part of the restart at a million). SQLite keeps them up to date on every insert
 *    and trim. One statement
 *    of DynamoDB Local's changes: GetRecords' read from the iterator's position, which
 *    SQLite 3.8.7 would then answer by walking the shard's records from its first (it
 *    cannot seek on the rowid inside an index), is prepared NOT INDEXED, so that it reads
 *    along the sequence numbers from the position, as it did without the indexes (see
 *    job 4 for the wrapper). Any failure here leaves DynamoDB Local as it was, only
 *    slower.
 *
 * 4. Scans in key order without sorting. A Scan pages through a table in the order of
 *    (hashValue, rangeKey), the hash of the partition key and the sort key, but the only
 *    index on hashValue holds it alone, so each page sorted all the rows of a partition
 *    (a queue shard of a million messages: seconds a page, a full export hours), and a
 *    page after the first selects its rows with `hashValue > ? OR (hashValue = ? AND
 *    rangeKey > ?)`, which SQLite 3.8.7 cannot seek with. sqlite4java's sqlite3_prepare16_v2
 *    is wrapped: for DynamoDB Local's Scan of a table with a sort key (those two exact
 *    statements, no segments) the table gets the index `dmq_scan:<table>` on (hashValue,
 *    rangeKey) if it lacks it, and a later page's statement is prepared as the union of
 *    the rest of the start's partition and the partitions after it, each a seek on that
 *    index ordered by it and cut at the page's limit: the same rows in the same order,
 *    at a cost that follows the page, not the table. Anything unexpected (another
 *    statement, a failed prepare of the new one) prepares DynamoDB Local's own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
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
    "CREATE INDEX IF NOT EXISTS dmq_stream_records ON us (StreamID, SequenceNumber);"
    "CREATE INDEX IF NOT EXISTS dmq_shard_records ON us (ShardID, SequenceNumber);"
    "CREATE INDEX IF NOT EXISTS dmq_record_times ON us (CreationDateTime);";
/* GetRecords' read. With the indexes above SQLite 3.8.7 would walk the shard's records
 * from its first (it cannot seek on the rowid, SequenceNumber, inside an index); read
 * from the iterator's position along the rowid, as without them. */
static const char STREAM_READ[] =
    "SELECT SequenceNumber, StreamRecord, OperationType, CreationDateTime FROM us WHERE "
    "StreamID = ? AND ShardID = ? AND SequenceNumber >= ? AND CreationDateTime > ? "
    "ORDER BY SequenceNumber ASC LIMIT ?;";
static const char STREAM_READ_ALONG[] =
    "SELECT SequenceNumber, StreamRecord, OperationType, CreationDateTime FROM us "
    "NOT INDEXED WHERE StreamID = ? AND ShardID = ? AND SequenceNumber >= ? AND "
    "CreationDateTime > ? ORDER BY SequenceNumber ASC LIMIT ?;";
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

/* Job 4. The two statements DynamoDB Local prepares for a Scan of a table with a sort
 * key, around its name: the first page's, and a later page's (from its start key). */
typedef int (*prepare_fn)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
typedef int (*prepare16_fn)(sqlite3 *, const void *, int, sqlite3_stmt **, const void **);

static const char SCAN_HEAD[] =
    "SELECT ObjectJSON FROM (SELECT ObjectJSON, hashKey, rangeKey FROM (SELECT hashValue, "
    "ObjectJSON, hashKey, rangeKey FROM \"";
static const char SCAN_FIRST_TAIL[] =
    "\"  ORDER BY hashValue , rangeKey) WHERE hashKey IS NOT NULL AND rangeKey IS NOT NULL"
    " )  LIMIT ?;";
static const char SCAN_AFTER_TAIL[] =
    "\"  ORDER BY hashValue , rangeKey) WHERE hashKey IS NOT NULL AND rangeKey IS NOT NULL"
    "  AND (hashValue > ? OR (hashValue = ? AND rangeKey > ?) ))  LIMIT ?;";
#define DMQ_TABLE_NAME_MAX 255 /* DynamoDB's limit */

/* The table a Scan statement names, copied to `table`; 0: not such a statement. *after
 * says whether it is a later page's. */
static int scanned_table(const char *sql, int length, char *table, int *after) {
    size_t head = sizeof SCAN_HEAD - 1;
    size_t size = length < 0 ? strlen(sql) : (size_t)length;
    if (size <= head || strncmp(sql, SCAN_HEAD, head) != 0) return 0;
    const char *name = sql + head;
    const char *end = memchr(name, '"', size - head);
    if (!end || end == name || end - name > DMQ_TABLE_NAME_MAX) return 0;
    size_t rest = size - (size_t)(end - sql);
    if (rest == sizeof SCAN_FIRST_TAIL - 1 && memcmp(end, SCAN_FIRST_TAIL, rest) == 0)
        *after = 0;
    else if (rest == sizeof SCAN_AFTER_TAIL - 1 && memcmp(end, SCAN_AFTER_TAIL, rest) == 0)
        *after = 1;
    else
        return 0;
    memcpy(table, name, (size_t)(end - name));
    table[end - name] = '\0';
    return 1;
}

/* The statement as 8-bit text, when it is short and ASCII (as DynamoDB Local's Scan
 * statements are); 0 otherwise. `length` is in bytes, or negative: up to a zero. */
static int ascii_of(const void *sql, int length, char *out, size_t room) {
    const unsigned short *units = sql;
    size_t count = 0;
    for (; length < 0 || count < (size_t)length / 2; count++) {
        unsigned short unit = units[count];
        if (length < 0 && unit == 0) break;
        if (unit == 0 || unit > 127 || count + 1 >= room) return 0;
        out[count] = (char)unit;
    }
    out[count] = '\0';
    return 1;
}

static prepare_fn real_prepare;

/* `text` prepared in place of the UTF-16 statement `sql` (which it ends, as far as the
 * caller can tell); the statement itself if `text` fails to prepare. */
static int prepared_as(sqlite3 *db, const char *text, const void *sql, int length,
                       sqlite3_stmt **statement, const void **tail, prepare16_fn prepare16) {
    if (real_prepare(db, text, -1, statement, NULL) != DMQ_SQLITE_OK)
        return prepare16(db, sql, length, statement, tail);
    if (tail) {
        const unsigned short *end = sql;
        if (length < 0)
            while (*end) end++;
        else
            end += length / 2;
        *tail = end;
    }
    return DMQ_SQLITE_OK;
}

/* sqlite4java prepares every statement from Java's UTF-16 text. */
int sqlite3_prepare16_v2(sqlite3 *db, const void *sql, int length, sqlite3_stmt **statement,
                         const void **tail) {
    static prepare16_fn real_prepare16;
    prepare16_fn prepare16 = __atomic_load_n(&real_prepare16, __ATOMIC_ACQUIRE);
    if (!prepare16) {
        const void *caller = __builtin_return_address(0);
        if (!real_exec) real_exec = (exec_fn)caller_symbol(caller, "sqlite3_exec");
        real_prepare = (prepare_fn)caller_symbol(caller, "sqlite3_prepare_v2");
        prepare16 = (prepare16_fn)caller_symbol(caller, "sqlite3_prepare16_v2");
        if (!prepare16) return DMQ_SQLITE_ERROR;
        __atomic_store_n(&real_prepare16, prepare16, __ATOMIC_RELEASE);
    }
    char original[2 * DMQ_TABLE_NAME_MAX + 512];
    char table[DMQ_TABLE_NAME_MAX + 1];
    int after = 0;
    if (!sql || !real_exec || !real_prepare
            || !ascii_of(sql, length, original, sizeof original))
        return prepare16(db, sql, length, statement, tail);
    if (strcmp(original, STREAM_READ) == 0)
        return prepared_as(db, STREAM_READ_ALONG, sql, length, statement, tail, prepare16);
    if (!scanned_table(original, -1, table, &after))
        return prepare16(db, sql, length, statement, tail);
    char text[4 * DMQ_TABLE_NAME_MAX + 1024];
    /* Created once per table (IF NOT EXISTS parses, finds it, and writes nothing). */
    snprintf(text, sizeof text,
             "CREATE INDEX IF NOT EXISTS \"dmq_scan:%s\" ON \"%s\" (hashValue, rangeKey);",
             table, table);
    real_exec(db, text, NULL, NULL, NULL);
    if (!after) return prepare16(db, sql, length, statement, tail);
    /* ?1 ?2 ?3 ?4 bind as DynamoDB Local's four: hashValue > ?1 OR (hashValue = ?2 AND
     * rangeKey > ?3), LIMIT ?4. */
    snprintf(text, sizeof text,
             "SELECT ObjectJSON FROM ("
             "SELECT hashValue, rangeKey, ObjectJSON FROM (SELECT hashValue, rangeKey, "
             "ObjectJSON FROM \"%s\" WHERE hashKey IS NOT NULL AND rangeKey IS NOT NULL AND "
             "hashValue = ?2 AND rangeKey > ?3 AND NOT (hashValue > ?1) "
             "ORDER BY hashValue, rangeKey LIMIT ?4) "
             "UNION ALL "
             "SELECT hashValue, rangeKey, ObjectJSON FROM (SELECT hashValue, rangeKey, "
             "ObjectJSON FROM \"%s\" WHERE hashKey IS NOT NULL AND rangeKey IS NOT NULL AND "
             "hashValue > ?1 ORDER BY hashValue, rangeKey LIMIT ?4)"
             ") ORDER BY hashValue, rangeKey LIMIT ?4;",
             table, table);
    return prepared_as(db, text, sql, length, statement, tail, prepare16);
}
