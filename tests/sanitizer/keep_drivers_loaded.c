/* Preloaded into the test programs of a sanitizer build only.
 *
 * Mesa unloads its driver (dlclose) in eglTerminate. Allocations the driver
 * still holds in its globals then look unreachable, and LeakSanitizer reports
 * them as leaks from "<unknown module>" with no symbol a suppression could
 * name. Keeping every library loaded keeps those allocations reachable, so
 * the leaks LeakSanitizer does report are real ones, ours included. */
int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
