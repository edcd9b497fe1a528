#include "profile_table.h"

#include <stdio.h>

void print_profile_table(gpu_queue *q, double steps, const char *what, const char *per)
{
    gpu_profile_entry e[128];
    size_t n = gpu_queue_profile_get(q, e, 128);
    n = n < 128 ? n : 128;
    double total = 0.0;
    for (size_t i = 0; i < n; i++)
        total += e[i].total_ns / steps / 1e3;
    printf("GPU time by dispatch, %s (a timestamp after each; %.1f us a %s):\n", what, total,
           per);
    printf("  %9s %7s %9s %9s %8s  %s\n", "us", "share", "count", "us each", "binary", "kernel");
    for (size_t i = 0; i < n; i++) {
        double us = e[i].total_ns / steps / 1e3;
        char kib[16] = "-";
        if (e[i].binary_bytes)
            snprintf(kib, sizeof kib, "%.1fK", e[i].binary_bytes / 1024.0);
        printf("  %9.1f %6.1f%% %9.2f %9.2f %8s  %s, %u groups%s\n", us, 100.0 * us / total,
               e[i].count / steps, e[i].total_ns / 1e3 / (double)e[i].count, kib, e[i].name,
               e[i].groups, e[i].barrier ? ", after a barrier" : "");
    }
}
