/* Loaded into DynamoDB Local only (LD_PRELOAD): its SQLite store calls fsync on every
 * write, about 20 ms each on an ordinary disk. DMQ syncs the database files itself once a
 * second instead (dmqlocal/dynamodb_local.py), so a crash of either process loses nothing
 * and a power cut at most the last second. DMQ_DYNAMODB_LOCAL_SYNC=always turns this off. */
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
