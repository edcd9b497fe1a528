/* A small test runner with the API of ThrowTheSwitch's Unity (setUp/tearDown,
 * UNITY_BEGIN/RUN_TEST/UNITY_END, TEST_ASSERT_*), written for glesllm. It is
 * used when the build is not given a real Unity (-DUNITY_SOURCE_DIR= or an
 * installed `unity` package); the test files build against either. Only the
 * subset of Unity the tests use is provided; output follows Unity's format:
 * "file:line:test:PASS|FAIL: msg|IGNORE: msg" and the closing summary. */
#ifndef GLESLLM_UNITY_H
#define GLESLLM_UNITY_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct UNITY_STORAGE_T {
    const char *TestFile;
    const char *CurrentTestName;
    unsigned long CurrentTestLineNumber;
    unsigned long NumberOfTests;
    unsigned long TestFailures;
    unsigned long TestIgnores;
    int CurrentTestFailed;
    int CurrentTestIgnored;
    jmp_buf AbortFrame;
};
extern struct UNITY_STORAGE_T Unity;

void setUp(void);
void tearDown(void);

void UnityBegin(const char *filename);
int UnityEnd(void);
void UnityDefaultTestRun(void (*func)(void), const char *name, int line);
void UnityFail(const char *msg, unsigned long line);
void UnityIgnore(const char *msg, unsigned long line);
void UnityMessage(const char *msg, unsigned long line);
void UnityAssertInt(intmax_t expected, intmax_t actual, const char *msg, unsigned long line);
void UnityAssertUInt(uintmax_t expected, uintmax_t actual, const char *msg, unsigned long line);
void UnityAssertFloatWithin(double delta, double expected, double actual, const char *msg,
                            unsigned long line);
void UnityAssertString(const char *expected, const char *actual, const char *msg,
                       unsigned long line);
void UnityAssertMemory(const void *expected, const void *actual, size_t len, const char *msg,
                       unsigned long line);
void UnityAssertCompareInt(int op, intmax_t threshold, intmax_t actual, const char *msg,
                           unsigned long line);
void UnityAssertCompareFloat(int op, double threshold, double actual, const char *msg,
                             unsigned long line);

#define UNITY_BEGIN() UnityBegin(__FILE__)
#define UNITY_END() UnityEnd()
#define RUN_TEST(func) UnityDefaultTestRun(func, #func, __LINE__)

#define TEST_LINE_ ((unsigned long)__LINE__)
#define TEST_FAIL_MESSAGE(m) UnityFail((m), TEST_LINE_)
#define TEST_FAIL() UnityFail(NULL, TEST_LINE_)
#define TEST_IGNORE_MESSAGE(m) UnityIgnore((m), TEST_LINE_)
#define TEST_IGNORE() UnityIgnore(NULL, TEST_LINE_)
#define TEST_MESSAGE(m) UnityMessage((m), TEST_LINE_)

#define TEST_ASSERT_MESSAGE(c, m)                                                                  \
    do {                                                                                           \
        if (!(c))                                                                                  \
            UnityFail((m), TEST_LINE_);                                                            \
    } while (0)
#define TEST_ASSERT(c) TEST_ASSERT_MESSAGE((c), "Expression Evaluated To FALSE")
#define TEST_ASSERT_TRUE(c) TEST_ASSERT_MESSAGE((c), "Expected TRUE Was FALSE")
#define TEST_ASSERT_TRUE_MESSAGE(c, m) TEST_ASSERT_MESSAGE((c), (m))
#define TEST_ASSERT_FALSE(c) TEST_ASSERT_MESSAGE(!(c), "Expected FALSE Was TRUE")
#define TEST_ASSERT_FALSE_MESSAGE(c, m) TEST_ASSERT_MESSAGE(!(c), (m))
#define TEST_ASSERT_NULL(p) TEST_ASSERT_MESSAGE((p) == NULL, "Expected NULL")
#define TEST_ASSERT_NULL_MESSAGE(p, m) TEST_ASSERT_MESSAGE((p) == NULL, (m))
#define TEST_ASSERT_NOT_NULL(p) TEST_ASSERT_MESSAGE((p) != NULL, "Expected Non-NULL")
#define TEST_ASSERT_NOT_NULL_MESSAGE(p, m) TEST_ASSERT_MESSAGE((p) != NULL, (m))

#define TEST_ASSERT_EQUAL_INT(e, a) UnityAssertInt((intmax_t)(e), (intmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_EQUAL_INT_MESSAGE(e, a, m)                                                     \
    UnityAssertInt((intmax_t)(e), (intmax_t)(a), (m), TEST_LINE_)
#define TEST_ASSERT_EQUAL(e, a) TEST_ASSERT_EQUAL_INT((e), (a))
#define TEST_ASSERT_EQUAL_MESSAGE(e, a, m) TEST_ASSERT_EQUAL_INT_MESSAGE((e), (a), (m))
#define TEST_ASSERT_NOT_EQUAL(e, a) TEST_ASSERT_MESSAGE((e) != (a), "Expected Not-Equal")
#define TEST_ASSERT_NOT_EQUAL_MESSAGE(e, a, m) TEST_ASSERT_MESSAGE((e) != (a), (m))
#define TEST_ASSERT_EQUAL_INT32(e, a) TEST_ASSERT_EQUAL_INT((e), (a))
#define TEST_ASSERT_EQUAL_INT32_MESSAGE(e, a, m) TEST_ASSERT_EQUAL_INT_MESSAGE((e), (a), (m))
#define TEST_ASSERT_EQUAL_INT32_ARRAY(e, a, n)                                                     \
    UnityAssertMemory((e), (a), (size_t)(n) * sizeof(int32_t), NULL, TEST_LINE_)
#define TEST_ASSERT_EQUAL_INT64(e, a) TEST_ASSERT_EQUAL_INT((e), (a))
#define TEST_ASSERT_EQUAL_UINT(e, a)                                                               \
    UnityAssertUInt((uintmax_t)(e), (uintmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_EQUAL_UINT_MESSAGE(e, a, m)                                                    \
    UnityAssertUInt((uintmax_t)(e), (uintmax_t)(a), (m), TEST_LINE_)
#define TEST_ASSERT_EQUAL_UINT8(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))
#define TEST_ASSERT_EQUAL_UINT32(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))
#define TEST_ASSERT_EQUAL_UINT32_MESSAGE(e, a, m) TEST_ASSERT_EQUAL_UINT_MESSAGE((e), (a), (m))
#define TEST_ASSERT_EQUAL_UINT64(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))
#define TEST_ASSERT_EQUAL_UINT64_MESSAGE(e, a, m) TEST_ASSERT_EQUAL_UINT_MESSAGE((e), (a), (m))
#define TEST_ASSERT_EQUAL_size_t(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))
#define TEST_ASSERT_EQUAL_HEX8(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))
#define TEST_ASSERT_EQUAL_HEX32(e, a) TEST_ASSERT_EQUAL_UINT((e), (a))

#define UNITY_OP_GT 1
#define UNITY_OP_GE 2
#define UNITY_OP_LT 3
#define UNITY_OP_LE 4
/* Unity's order: threshold first, then the value under test. */
#define TEST_ASSERT_GREATER_THAN_INT(t, a)                                                         \
    UnityAssertCompareInt(UNITY_OP_GT, (intmax_t)(t), (intmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_GREATER_OR_EQUAL_INT(t, a)                                                     \
    UnityAssertCompareInt(UNITY_OP_GE, (intmax_t)(t), (intmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_LESS_THAN_INT(t, a)                                                            \
    UnityAssertCompareInt(UNITY_OP_LT, (intmax_t)(t), (intmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_LESS_OR_EQUAL_INT(t, a)                                                        \
    UnityAssertCompareInt(UNITY_OP_LE, (intmax_t)(t), (intmax_t)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_GREATER_THAN_UINT32(t, a) TEST_ASSERT_GREATER_THAN_INT((t), (a))
#define TEST_ASSERT_GREATER_OR_EQUAL_UINT32(t, a) TEST_ASSERT_GREATER_OR_EQUAL_INT((t), (a))
#define TEST_ASSERT_LESS_OR_EQUAL_UINT32(t, a) TEST_ASSERT_LESS_OR_EQUAL_INT((t), (a))
#define TEST_ASSERT_LESS_THAN_FLOAT(t, a)                                                          \
    UnityAssertCompareFloat(UNITY_OP_LT, (double)(t), (double)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_LESS_OR_EQUAL_FLOAT(t, a)                                                      \
    UnityAssertCompareFloat(UNITY_OP_LE, (double)(t), (double)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_GREATER_THAN_FLOAT(t, a)                                                       \
    UnityAssertCompareFloat(UNITY_OP_GT, (double)(t), (double)(a), NULL, TEST_LINE_)

#define TEST_ASSERT_FLOAT_WITHIN(d, e, a)                                                          \
    UnityAssertFloatWithin((double)(d), (double)(e), (double)(a), NULL, TEST_LINE_)
#define TEST_ASSERT_FLOAT_WITHIN_MESSAGE(d, e, a, m)                                               \
    UnityAssertFloatWithin((double)(d), (double)(e), (double)(a), (m), TEST_LINE_)
#define TEST_ASSERT_EQUAL_STRING(e, a) UnityAssertString((e), (a), NULL, TEST_LINE_)
#define TEST_ASSERT_EQUAL_STRING_MESSAGE(e, a, m) UnityAssertString((e), (a), (m), TEST_LINE_)
#define TEST_ASSERT_EQUAL_MEMORY(e, a, n) UnityAssertMemory((e), (a), (n), NULL, TEST_LINE_)
#define TEST_ASSERT_EQUAL_MEMORY_MESSAGE(e, a, n, m) UnityAssertMemory((e), (a), (n), (m), TEST_LINE_)

#ifdef __cplusplus
}
#endif
#endif
