/* Temporary names of whole-file writes. See tmp_files.h. */
#include "common/tmp_files.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"

void path_folder(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + (slash == path) : 1;
    if (dl >= n)
        dl = n - 1;
    memcpy(dir, slash ? path : ".", dl);
    dir[dl] = '\0';
}

glesllm_status tmp_name(const char *path, char *out, size_t n)
{
    if ((size_t)snprintf(out, n, "%s.tmp.%ld", path, (long)getpid()) >= n)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%s: the path is too long", path);
    return GLESLLM_OK;
}

void tmp_sweep(const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    char dir[4096];
    if (!*base || strlen(path) >= sizeof dir)
        return;
    path_folder(path, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t bl = strlen(base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0)
            continue;
        char *end;
        long pid = strtol(name + bl + 5, &end, 10);
        if (*end || pid <= 0 || end == name + bl + 5 || pid == (long)getpid())
            continue;
        /* (a process of another user answers EPERM: it runs, its file stays) */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char full[8192];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, name) < sizeof full)
            unlink(full);
    }
    closedir(d);
}
