/* Loaded into DynamoDB Local only (LD_PRELOAD). Two jobs:
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
 *    at most the last second. DMQ_DYNAMODB_LOCAL_SYNC=always leaves fsync alone. */
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
