/* The draft length greedy speculative decoding picks (engine/draft_length.h)
 * from given costs: no GPU. Costs are in units of a target step; the pass
 * costs of "h200" are bench_verify's for the Mistral-7B shape (Q4_0) on an
 * H200 (bench/RESULTS.md "Verifying drafted tokens"): 1.28, 1.50, 1.91 and
 * 2.36 steps for 1, 2, 4 and 8 drafted tokens. */
#include "engine/draft_length.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

static void h200_passes(draft_costs *c)
{
    draft_costs_pass(c, 0, 1.0);
    draft_costs_pass(c, 1, 1.28);
    draft_costs_pass(c, 2, 1.50);
    draft_costs_pass(c, 4, 1.91);
    draft_costs_pass(c, 8, 2.36);
}

/* n rounds of k drafted tokens, `kept` of them kept each */
static void rounds(draft_costs *c, int n, uint32_t k, uint32_t kept)
{
    for (int i = 0; i < n; i++)
        draft_costs_round(c, k, kept);
}

static void test_unmeasured_drafts_the_most(void)
{
    draft_costs c;
    draft_costs_init(&c);
    TEST_ASSERT_EQUAL_UINT(8, draft_length_pick(&c, 0, 8, NULL));
    draft_costs_pass(&c, 0, 1.0); /* a pass, but no drafting measured */
    TEST_ASSERT_EQUAL_UINT(8, draft_length_pick(&c, 0, 8, NULL));
    double rate = 1.0;
    draft_costs_init(&c);
    draft_costs_drafted(&c, 8, 8.0); /* drafting, but no pass */
    TEST_ASSERT_EQUAL_UINT(5, draft_length_pick(&c, 2, 5, &rate));
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, rate);
}

static void test_after_one_round_a_plain_step_is_tried(void)
{
    /* one round of 8 drafted, all kept: only the 8-token pass is known, so
     * a plain step is estimated at a ninth of it and tried (measured next) */
    draft_costs c;
    draft_costs_init(&c);
    draft_costs_drafted(&c, 8, 8 * 0.3);
    draft_costs_pass(&c, 8, 2.4);
    draft_costs_round(&c, 8, 8);
    TEST_ASSERT_EQUAL_UINT(0, draft_length_pick(&c, 0, 8, NULL));
    /* --draft-min 1 keeps drafting */
    TEST_ASSERT_NOT_EQUAL(0, draft_length_pick(&c, 1, 8, NULL));
}

static void test_an_expensive_draft_does_not_draft(void)
{
    /* the Q4_0 draft of a Q8_0 target on an H200: its step 0.72 of the
     * target's, 62% of its tokens kept. One drafted token gives 1.62 tokens
     * for 0.72 + 1.28 = 2.0 steps: plain steps are faster */
    draft_costs c;
    draft_costs_init(&c);
    h200_passes(&c);
    draft_costs_drafted(&c, 4, 4 * 0.72);
    rounds(&c, 100, 4, 2);
    double rate;
    TEST_ASSERT_EQUAL_UINT(0, draft_length_pick(&c, 0, 8, &rate));
    TEST_ASSERT_FLOAT_WITHIN(1e-9, 1.0, rate); /* a token a step */
    /* the same model as its own draft, every token kept: never pays either */
    draft_costs_init(&c);
    h200_passes(&c);
    draft_costs_drafted(&c, 8, 8 * 1.0);
    rounds(&c, 100, 8, 8);
    TEST_ASSERT_EQUAL_UINT(0, draft_length_pick(&c, 0, 8, NULL));
    /* but where asked to draft, it drafts within the bounds */
    uint32_t k = draft_length_pick(&c, 3, 6, NULL);
    TEST_ASSERT_TRUE(k >= 3 && k <= 6);
}

static void test_a_cheap_draft_drafts_as_far_as_pays(void)
{
    /* a draft at 0.1 of a step, 4 of 5 tokens kept (p = 41/52 with the
     * prior): expected tokens a step 1.30 for 1 drafted, 1.42 for 2, 1.447
     * for 3 (its pass estimated between 2's and 4's), 1.423 for 4 and 5,
     * 1.40 for 6 */
    draft_costs c;
    draft_costs_init(&c);
    h200_passes(&c);
    draft_costs_drafted(&c, 4, 0.4);
    c.kept = 40.0;
    c.missed = 10.0;
    double rate;
    TEST_ASSERT_EQUAL_UINT(3, draft_length_pick(&c, 0, 8, &rate));
    TEST_ASSERT_FLOAT_WITHIN(2e-3, 1.4466, rate);
    TEST_ASSERT_EQUAL_UINT(5, draft_length_pick(&c, 5, 8, NULL)); /* --draft-min 5 */
    TEST_ASSERT_EQUAL_UINT(2, draft_length_pick(&c, 0, 2, NULL)); /* --draft-max 2 */
    /* a free draft whose every token is kept drafts the most */
    draft_costs_init(&c);
    h200_passes(&c);
    draft_costs_drafted(&c, 8, 1e-6);
    rounds(&c, 200, 8, 8);
    TEST_ASSERT_EQUAL_UINT(8, draft_length_pick(&c, 0, 8, NULL));
    /* then rejections: each round keeps none, the length falls to plain steps */
    rounds(&c, 200, 8, 0);
    TEST_ASSERT_EQUAL_UINT(0, draft_length_pick(&c, 0, 8, NULL));
}

static void test_measurements_average_and_bad_ones_are_ignored(void)
{
    draft_costs c;
    draft_costs_init(&c);
    draft_costs_pass(&c, 2, 1.0);
    draft_costs_pass(&c, 2, 2.0); /* 0.7 of the old, 0.3 of the new */
    TEST_ASSERT_FLOAT_WITHIN(1e-12, 1.3, c.pass_s[2]);
    draft_costs_pass(&c, 2, 0.0);
    draft_costs_pass(&c, 2, -1.0);
    draft_costs_pass(&c, GEN_DRAFT_MAX_LIMIT + 1, 5.0);
    TEST_ASSERT_FLOAT_WITHIN(1e-12, 1.3, c.pass_s[2]);
    draft_costs_drafted(&c, 0, 1.0);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, c.draft_s);
    draft_costs_drafted(&c, 4, 2.0);
    TEST_ASSERT_FLOAT_WITHIN(1e-12, 0.5, c.draft_s);
    draft_costs_round(&c, 0, 0); /* no drafted token: no evidence */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, c.kept + c.missed);
    draft_costs_round(&c, 3, 7); /* never more kept than drafted */
    TEST_ASSERT_FLOAT_WITHIN(1e-12, 3.0, c.kept);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, c.missed);
    /* bounds past the limit are clamped */
    TEST_ASSERT_EQUAL_UINT(GEN_DRAFT_MAX_LIMIT, draft_length_pick(&c, 40, 100, NULL));
}

static void test_drafting_again_after_plain_steps(void)
{
    draft_costs c;
    draft_costs_init(&c);
    TEST_ASSERT_TRUE(draft_costs_probe(&c)); /* nothing known: try */
    draft_costs_pass(&c, 0, 1.0);
    TEST_ASSERT_TRUE(draft_costs_probe(&c));
    /* the Q4_0 draft of a Q8_0 target catching up on 16 plain tokens in a
     * prefill at about 0.2 of a plain step a token: not again */
    draft_costs_catch_up(&c, 16, 16 * 0.2);
    TEST_ASSERT_FALSE(draft_costs_probe(&c));
    /* a draft that catches up at 0.03 of a step a token: again */
    draft_costs_init(&c);
    draft_costs_pass(&c, 0, 1.0);
    draft_costs_catch_up(&c, 32, 32 * 0.03);
    TEST_ASSERT_TRUE(draft_costs_probe(&c));
    /* a catching up measured at nothing (its time within the steps'
     * estimate) counts as cheap, not as unmeasured */
    draft_costs_catch_up(&c, 8, -0.5);
    TEST_ASSERT_TRUE(c.catch_up_s > 0.0 && c.catch_up_s < 0.03);
    draft_costs_catch_up(&c, 0, 5.0); /* no tokens: no evidence */
    TEST_ASSERT_TRUE(c.catch_up_s < 0.03);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_unmeasured_drafts_the_most);
    RUN_TEST(test_after_one_round_a_plain_step_is_tried);
    RUN_TEST(test_an_expensive_draft_does_not_draft);
    RUN_TEST(test_a_cheap_draft_drafts_as_far_as_pays);
    RUN_TEST(test_measurements_average_and_bad_ones_are_ignored);
    RUN_TEST(test_drafting_again_after_plain_steps);
    return UNITY_END();
}
