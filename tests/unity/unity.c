/* glesllm's Unity-compatible runner; see unity.h. */
#include "unity.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

struct UNITY_STORAGE_T Unity;

void UnityBegin(const char *filename)
{
    memset(&Unity, 0, sizeof Unity);
    Unity.TestFile = filename;
}

static void finish_fail(const char *detail, const char *msg, unsigned long line)
{
    printf("%s:%lu:%s:FAIL", Unity.TestFile, line, Unity.CurrentTestName);
    if (detail && *detail)
        printf(": %s", detail);
    if (msg && *msg)
        printf(". %s", msg);
    printf("\n");
    fflush(stdout);
    Unity.CurrentTestFailed = 1;
    longjmp(Unity.AbortFrame, 1);
}

void UnityFail(const char *msg, unsigned long line) { finish_fail(NULL, msg, line); }

void UnityIgnore(const char *msg, unsigned long line)
{
    printf("%s:%lu:%s:IGNORE", Unity.TestFile, line, Unity.CurrentTestName);
    if (msg && *msg)
        printf(": %s", msg);
    printf("\n");
    fflush(stdout);
    Unity.CurrentTestIgnored = 1;
    longjmp(Unity.AbortFrame, 1);
}

void UnityMessage(const char *msg, unsigned long line)
{
    printf("%s:%lu:%s:INFO: %s\n", Unity.TestFile, line,
           Unity.CurrentTestName ? Unity.CurrentTestName : "", msg ? msg : "");
    fflush(stdout);
}

void UnityDefaultTestRun(void (*func)(void), const char *name, int line)
{
    Unity.CurrentTestName = name;
    Unity.CurrentTestLineNumber = (unsigned long)line;
    Unity.NumberOfTests++;
    Unity.CurrentTestFailed = 0;
    Unity.CurrentTestIgnored = 0;
    if (setjmp(Unity.AbortFrame) == 0) {
        setUp();
        func();
    }
    if (setjmp(Unity.AbortFrame) == 0)
        tearDown();
    if (Unity.CurrentTestFailed)
        Unity.TestFailures++;
    else if (Unity.CurrentTestIgnored)
        Unity.TestIgnores++;
    else
        printf("%s:%d:%s:PASS\n", Unity.TestFile, line, name);
    fflush(stdout);
    Unity.CurrentTestName = NULL;
}

int UnityEnd(void)
{
    printf("\n-----------------------\n%lu Tests %lu Failures %lu Ignored\n%s\n", Unity.NumberOfTests,
           Unity.TestFailures, Unity.TestIgnores, Unity.TestFailures ? "FAIL" : "OK");
    fflush(stdout);
    return (int)Unity.TestFailures;
}

void UnityAssertInt(intmax_t expected, intmax_t actual, const char *msg, unsigned long line)
{
    if (expected == actual)
        return;
    char d[128];
    snprintf(d, sizeof d, "Expected %" PRIdMAX " Was %" PRIdMAX, expected, actual);
    finish_fail(d, msg, line);
}

void UnityAssertUInt(uintmax_t expected, uintmax_t actual, const char *msg, unsigned long line)
{
    if (expected == actual)
        return;
    char d[128];
    snprintf(d, sizeof d, "Expected %" PRIuMAX " Was %" PRIuMAX, expected, actual);
    finish_fail(d, msg, line);
}

void UnityAssertFloatWithin(double delta, double expected, double actual, const char *msg,
                            unsigned long line)
{
    if (fabs(expected - actual) <= fabs(delta))
        return;
    char d[160];
    snprintf(d, sizeof d, "Expected %.9g Was %.9g (within %.3g)", expected, actual, delta);
    finish_fail(d, msg, line);
}

void UnityAssertString(const char *expected, const char *actual, const char *msg,
                       unsigned long line)
{
    if (expected && actual && strcmp(expected, actual) == 0)
        return;
    if (!expected && !actual)
        return;
    char d[512];
    snprintf(d, sizeof d, "Expected '%.200s' Was '%.200s'", expected ? expected : "NULL",
             actual ? actual : "NULL");
    finish_fail(d, msg, line);
}

void UnityAssertMemory(const void *expected, const void *actual, size_t len, const char *msg,
                       unsigned long line)
{
    const unsigned char *e = expected, *a = actual;
    for (size_t i = 0; i < len; i++) {
        if (e[i] != a[i]) {
            char d[128];
            snprintf(d, sizeof d, "Memory Mismatch at byte %zu: Expected 0x%02X Was 0x%02X", i, e[i],
                     a[i]);
            finish_fail(d, msg, line);
        }
    }
}

static int compare_ok(int op, double threshold, double actual)
{
    switch (op) {
    case UNITY_OP_GT: return actual > threshold;
    case UNITY_OP_GE: return actual >= threshold;
    case UNITY_OP_LT: return actual < threshold;
    case UNITY_OP_LE: return actual <= threshold;
    }
    return 0;
}

static const char *op_name(int op)
{
    return op == UNITY_OP_GT ? "greater than" : op == UNITY_OP_GE ? "greater or equal to"
           : op == UNITY_OP_LT ? "less than" : "less or equal to";
}

void UnityAssertCompareInt(int op, intmax_t threshold, intmax_t actual, const char *msg,
                           unsigned long line)
{
    int ok = op == UNITY_OP_GT ? actual > threshold
             : op == UNITY_OP_GE ? actual >= threshold
             : op == UNITY_OP_LT ? actual < threshold
                                 : actual <= threshold;
    if (ok)
        return;
    char d[160];
    snprintf(d, sizeof d, "Expected %s %" PRIdMAX " Was %" PRIdMAX, op_name(op), threshold, actual);
    finish_fail(d, msg, line);
}

void UnityAssertCompareFloat(int op, double threshold, double actual, const char *msg,
                             unsigned long line)
{
    if (compare_ok(op, threshold, actual))
        return;
    char d[160];
    snprintf(d, sizeof d, "Expected %s %.9g Was %.9g", op_name(op), threshold, actual);
    finish_fail(d, msg, line);
}
