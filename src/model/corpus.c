/*
 * The built-in corpus: simple English stories written by a small generator, so vkattn can train
 * out of the box with no download. Nothing is copied from anywhere: each story picks a hero, a
 * friend, an object, places and a plot from the word lists below with a fixed-seed RNG and
 * expands sentence templates into text. The text is plain ASCII (letters, spaces, . , ! ? ' "
 * and newlines; a vocabulary of about 60 characters, like tinyshakespeare's 65) and
 * deterministic: the same size always gives the same bytes, and a shorter corpus is a prefix of
 * a longer one.
 *
 * Templates use {key} placeholders filled from the story's cast (see expand()): a capitalised
 * key gives a capitalised word ({P} "She", {p} "she").
 */
#include "vka_internal.h"
#include "model/rng.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_SEED 0x7374726965730001ull /* "stories" */
#define CORPUS_DEFAULT_BYTES ((size_t)1 << 20)

typedef struct {
    const char *name;
    int she; /* 1: she/her, 0: he/him */
} person;

static const person NAMES[] = {
    {"Mia", 1},   {"Sam", 0},   {"Lily", 1},  {"Tom", 0},   {"Anna", 1},  {"Ben", 0},
    {"Zoe", 1},   {"Max", 0},   {"Ella", 1},  {"Leo", 0},   {"Rosa", 1},  {"Jack", 0},
    {"Nina", 1},  {"Finn", 0},  {"Lucy", 1},  {"Oscar", 0}, {"Ivy", 1},   {"Hugo", 0},
    {"Maya", 1},  {"Noah", 0},  {"Clara", 1}, {"Eli", 0},   {"Ruby", 1},  {"Owen", 0},
    {"Daisy", 1}, {"Theo", 0},  {"Grace", 1}, {"Kai", 0},   {"Sofia", 1}, {"Luke", 0},
    {"Hazel", 1}, {"Milo", 0},  {"Poppy", 1}, {"Jonah", 0}, {"Iris", 1},  {"Adam", 0},
};
/* What the hero is; girls and boys are picked by pronoun, animals by either. */
static const char *GIRL_KINDS[] = {"girl", "little girl", "young girl"};
static const char *BOY_KINDS[] = {"boy", "little boy", "young boy"};
static const char *ANIMAL_KINDS[] = {"cat", "dog", "rabbit", "bear", "fox", "duck", "mouse",
                                     "puppy", "kitten", "frog", "squirrel", "pig", "lamb", "owl"};
static const char *TRAITS[] = {"kind", "brave", "shy", "curious", "funny", "clever", "happy",
                               "busy", "gentle", "quiet", "cheerful", "careful", "playful",
                               "friendly", "small", "sleepy", "proud", "helpful"};
static const char *LIKES[] = {"to sing songs", "to draw pictures", "to run fast", "to read books",
                              "to dance", "to build towers", "to climb trees", "to bake cakes",
                              "to count the stars", "to jump in puddles", "to pick flowers",
                              "to play games", "to look at clouds", "to splash in the water",
                              "to tell jokes", "to help others", "to collect shells",
                              "to ride a bike"};
static const char *HOMES[] = {
    "a small blue house near the river", "a big farm by the hill",
    "a tiny cottage in the woods",       "a tall yellow house in the town",
    "a warm nest in an old tree",        "a little house with a red door",
    "a quiet village by the sea",        "a cozy den under a big rock",
    "a busy street in the city",         "a white house next to the park"};
static const char *COLORS[] = {"red", "blue", "green", "yellow", "shiny", "little", "big",
                               "old", "new", "soft", "pink", "purple", "golden", "tiny"};
static const char *OBJECTS[] = {"ball", "kite", "hat", "box", "boat", "book", "cup", "drum",
                                "shell", "key", "lamp", "doll", "toy car", "ring", "bell", "map",
                                "scarf", "balloon", "teddy bear", "spoon", "stone", "basket",
                                "flag", "whistle", "crown", "blanket", "paintbrush", "jar"};
static const char *PLACES[] = {"the park", "the beach", "the forest", "the garden", "the market",
                               "the lake", "the hill", "school", "the farm", "the zoo",
                               "the library", "the playground", "the river", "the meadow",
                               "the pond", "the bakery", "the old bridge", "the big tree"};
static const char *TIMES[] = {"One sunny morning",        "One rainy afternoon",
                              "Late one night",           "On a cold winter day",
                              "One windy day",            "On a warm summer evening",
                              "One bright spring morning", "One foggy day",
                              "After lunch one day",      "Early one Saturday"};
static const char *HELPERS[] = {"old man", "wise owl", "friendly frog", "tall giraffe",
                                "little bird", "kind lady", "big brown bear", "busy bee",
                                "old turtle", "happy farmer", "gentle horse", "clever crow"};
static const char *FEELINGS_GOOD[] = {"happy", "proud", "glad", "excited", "calm", "thankful"};
static const char *FEELINGS_BAD[] = {"sad", "worried", "scared", "upset", "lonely", "cross"};
/* What each plot teaches (indexed like the plots in story()). */
static const char *LESSONS_LOST[] = {"friends help each other", "asking for help is a good thing",
                                     "it is good to take care of your things",
                                     "kind people are everywhere"};
static const char *LESSONS_SHARE[] = {"it is good to share", "it is kind to say sorry",
                                      "playing together is more fun than playing alone",
                                      "listening is a way to be kind"};
static const char *LESSONS_BRAVE[] = {"being brave is not the same as not being scared",
                                      "it is fun to try new things",
                                      "a good friend makes every road shorter",
                                      "most scary things are not so scary up close"};
static const char *LESSONS_MAKE[] = {"a little patience goes a long way",
                                     "slow and careful is often best",
                                     "it is fine to fail and try again",
                                     "every small job matters"};

/* The cast of one story: what the {keys} expand to. */
typedef struct {
    const char *hero, *hero_kind, *friend, *friend_kind;
    int hero_she, friend_she;
    const char *trait, *friend_trait, *like, *home, *color, *object, *place, *place2, *time;
    const char *helper, *good, *bad, *lesson;
} cast;

/* A growing string. */
typedef struct {
    const vka_context *ctx; /* whose allocator s comes from (NULL: libc) */
    char *s;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = vka_realloc(b->ctx, b->s, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static const char *pronoun(int she, char kind) {
    switch (kind) {
    case 'P': return she ? "she" : "he";   /* subject */
    case 'O': return she ? "her" : "him";  /* object */
    default: return she ? "her" : "his";   /* possessive */
    }
}

/* The text for one placeholder key, or NULL if unknown. */
static const char *lookup(const cast *c, const char *key, size_t n) {
#define KEY(k) (n == sizeof(k) - 1 && strncmp(key, k, n) == 0)
    if (KEY("n")) return c->hero;
    if (KEY("k")) return c->hero_kind;
    if (KEY("p")) return pronoun(c->hero_she, 'P');
    if (KEY("o")) return pronoun(c->hero_she, 'O');
    if (KEY("s")) return pronoun(c->hero_she, 'S');
    if (KEY("f")) return c->friend;
    if (KEY("fk")) return c->friend_kind;
    if (KEY("fp")) return pronoun(c->friend_she, 'P');
    if (KEY("fo")) return pronoun(c->friend_she, 'O');
    if (KEY("fs")) return pronoun(c->friend_she, 'S');
    if (KEY("trait")) return c->trait;
    if (KEY("ftrait")) return c->friend_trait;
    if (KEY("like")) return c->like;
    if (KEY("home")) return c->home;
    if (KEY("color")) return c->color;
    if (KEY("obj")) return c->object;
    if (KEY("place")) return c->place;
    if (KEY("place2")) return c->place2;
    if (KEY("time")) return c->time;
    if (KEY("helper")) return c->helper;
    if (KEY("good")) return c->good;
    if (KEY("bad")) return c->bad;
    if (KEY("lesson")) return c->lesson;
#undef KEY
    return NULL;
}

/* Append template t with its {keys} replaced. "{a} " before a placeholder gives "a " or
 * "an " by that word's first letter ("{A} " at the start of a sentence). */
static void expand(sbuf *b, const cast *c, const char *t) {
    int article = 0; /* 0 none, 1 "a", 2 "A" */
    while (*t) {
        if (*t != '{') {
            const char *e = strchr(t, '{');
            size_t n = e ? (size_t)(e - t) : strlen(t);
            sb_put(b, t, n);
            t += n;
            continue;
        }
        const char *close = strchr(t, '}');
        if (!close) return; /* templates are ours; a missing brace ends the sentence */
        char key[16] = {0};
        size_t n = (size_t)(close - t - 1);
        if (n >= sizeof key) n = sizeof key - 1;
        memcpy(key, t + 1, n);
        bool cap = isupper((unsigned char)key[0]);
        key[0] = (char)tolower((unsigned char)key[0]);
        t = close + 1;
        if (strcmp(key, "a") == 0) {
            article = cap ? 2 : 1;
            if (*t == ' ') t++; /* the article brings its own space */
            continue;
        }
        const char *word = lookup(c, key, strlen(key));
        if (!word) continue;
        if (article) {
            bool vowel = strchr("aeiou", word[0]) != NULL;
            sb_puts(b, article == 2 ? (vowel ? "An " : "A ") : (vowel ? "an " : "a "));
            article = 0;
        }
        if (cap && word[0]) {
            char first = (char)toupper((unsigned char)word[0]);
            sb_put(b, &first, 1);
            sb_puts(b, word + 1);
        } else {
            sb_puts(b, word);
        }
    }
}

#define PICK(rng, list) ((list)[vkm_rng_below((rng), VKA_ARRAY_LEN(list))])
/* Expand one template picked from a list. */
#define SAY(b, c, rng, ...)                                          \
    do {                                                             \
        static const char *const options_[] = {__VA_ARGS__};         \
        expand((b), (c), options_[vkm_rng_below((rng), VKA_ARRAY_LEN(options_))]); \
    } while (0)

static void make_cast(cast *c, uint64_t *rng) {
    const person *h = &PICK(rng, NAMES);
    const person *f;
    do {
        f = &PICK(rng, NAMES);
    } while (f == h);
    c->hero = h->name;
    c->hero_she = h->she;
    c->friend = f->name;
    c->friend_she = f->she;
    bool animal = vkm_rng_below(rng, 3) == 0;
    c->hero_kind = animal ? PICK(rng, ANIMAL_KINDS) : h->she ? PICK(rng, GIRL_KINDS)
                                                             : PICK(rng, BOY_KINDS);
    c->friend_kind = animal ? PICK(rng, ANIMAL_KINDS) : f->she ? PICK(rng, GIRL_KINDS)
                                                               : PICK(rng, BOY_KINDS);
    c->trait = PICK(rng, TRAITS);
    c->friend_trait = PICK(rng, TRAITS);
    c->like = PICK(rng, LIKES);
    c->home = PICK(rng, HOMES);
    c->color = PICK(rng, COLORS);
    c->object = PICK(rng, OBJECTS);
    c->place = PICK(rng, PLACES);
    do {
        c->place2 = PICK(rng, PLACES);
    } while (c->place2 == c->place);
    c->time = PICK(rng, TIMES);
    c->helper = PICK(rng, HELPERS);
    c->good = PICK(rng, FEELINGS_GOOD);
    c->bad = PICK(rng, FEELINGS_BAD);
}

static void opening(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "Once upon a time, there was {a} {trait} {k} named {n}. ",
        "There once was {a} {trait} {k} called {n}. ", "{N} was {a} {trait} {k}. ",
        "Long ago, in a land far away, lived {a} {trait} {k} named {n}. ");
    SAY(b, c, rng, "{P} lived in {home}. ", "{P} and {s} family lived in {home}. ",
        "{S} home was {home}. ", "Every day, {p} went out to play. ");
    SAY(b, c, rng, "{N} loved {like}, and {p} had {a} {color} {obj} that {p} took everywhere.",
        "{P} had {a} {color} {obj}. It was {s} favorite thing in the whole world.",
        "More than anything, {n} liked {like}.",
        "{N} had a best friend, {a} {ftrait} {fk} named {f}.");
    sb_puts(b, "\n\n");
}

/* Plot: the object is lost or stuck and a helper finds a way. */
static void plot_lost(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "{Time}, {n} went to {place} with {s} {color} {obj}. ",
        "{Time}, {n} and {f} took the {color} {obj} to {place}. ");
    SAY(b, c, rng, "{P} played and played until the sun was low. ",
        "They ran and laughed all day. ", "It was a perfect day to play. ");
    SAY(b, c, rng, "But then the {obj} was gone! ",
        "Suddenly, a strong wind blew the {obj} up into a tall tree. ",
        "Oh no! The {obj} fell into the water and floated away. ",
        "When {p} looked down, the {obj} was not there anymore. ");
    SAY(b, c, rng, "{N} felt {bad}.\n\n", "{N} was very {bad}. {P} began to cry.\n\n",
        "\"Where is my {obj}?\" {n} said. \"I want it back!\"\n\n");
    SAY(b, c, rng, "Just then, {a} {helper} came by. ", "{A} {helper} saw {o} and stopped. ",
        "{F} ran to get help and came back with {a} {helper}. ");
    SAY(b, c, rng, "\"Why are you {bad}?\" asked the {helper}. ",
        "\"What is wrong, little one?\" asked the {helper}. ",
        "\"Can I help you?\" said the {helper}. ");
    SAY(b, c, rng, "{N} told the {helper} about the {obj}. ",
        "\"I lost my {color} {obj},\" said {n}. ");
    SAY(b, c, rng, "The {helper} looked high and low, and at last found the {obj} near {place2}.",
        "The {helper} had a good idea. Together they got the {obj} back.",
        "The {helper} reached out and gave the {obj} back to {n}.");
    sb_puts(b, "\n\n");
    SAY(b, c, rng, "\"Thank you!\" said {n} with a big smile. ",
        "{N} hugged the {helper}. \"Thank you so much!\" {p} said. ",
        "{N} was so {good}. {P} said thank you again and again. ");
}

/* Plot: the hero does not want to share, then learns to. */
static void plot_share(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "{Time}, {f} came to play at {place}. ",
        "{Time}, {n} met {f}, {a} {ftrait} {fk}, at {place}. ");
    SAY(b, c, rng, "{F} saw the {color} {obj} and wanted to play with it. ",
        "\"Can I play with your {obj}?\" asked {f}. ");
    SAY(b, c, rng, "\"No, it is mine!\" said {n}. ", "{N} held the {obj} tight and said no. ",
        "But {n} did not want to share. ");
    SAY(b, c, rng, "{F} felt {bad} and walked away.\n\n",
        "{F} sat down alone and looked {bad}.\n\n");
    SAY(b, c, rng, "Soon {n} was {bad} too. Playing alone was not fun. ",
        "After a while, {n} felt lonely. The {obj} was no fun without a friend. ",
        "{N} looked at {f} and thought about how {fp} felt. ");
    SAY(b, c, rng, "{P} walked over to {f} and said, \"I am sorry. Do you want to play?\" ",
        "{P} gave the {obj} to {f} and said, \"Let's play together.\" ");
    SAY(b, c, rng, "{F} smiled. They took turns with the {obj} all afternoon.",
        "{F} was {good}, and the two friends played until dinner time.",
        "\"Yes!\" said {f}. They had the best day ever.");
    sb_puts(b, "\n\n");
}

/* Plot: a trip with a small fear that the hero overcomes. */
static void plot_brave(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "{Time}, {n} and {f} went on a walk to {place}. ",
        "{Time}, {n} wanted to see {place}, so {p} asked {f} to come along. ");
    SAY(b, c, rng, "The path was long and the trees were tall. ",
        "On the way they saw birds, flowers and a little stream. ",
        "They sang songs as they walked. ");
    SAY(b, c, rng, "Then they came to a dark cave. ", "Then they heard a loud noise. ",
        "Then they came to a narrow bridge over the river. ");
    SAY(b, c, rng, "{N} felt {bad}. \"I do not want to go on,\" {p} said.\n\n",
        "{N} stopped. {S} legs were shaking.\n\n",
        "\"What was that?\" whispered {n}. {P} was {bad}.\n\n");
    SAY(b, c, rng, "{F} held {s} hand. \"We can do it together,\" {fp} said. ",
        "{N} took a deep breath and thought of {s} {color} {obj}. ",
        "\"Be brave,\" said {f}. \"I am right here.\" ");
    SAY(b, c, rng, "Step by step, they went on. ", "Slowly, {n} walked forward. ");
    SAY(b, c, rng, "It was only {a} {helper}, who said hello and showed them the way home.",
        "On the other side they found a field full of flowers.",
        "Soon they reached {place2}, and it was beautiful.");
    sb_puts(b, "\n\n");
    SAY(b, c, rng, "{N} felt {good}. {P} had been brave. ",
        "\"We did it!\" shouted {n}. ", "{N} laughed. It was not so scary after all. ");
}

/* Plot: the hero makes something, it goes wrong, they try again. */
static void plot_make(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "{Time}, {n} wanted to make a gift for {f}. ",
        "{Time}, {n} decided to bake a cake for {s} mom. ",
        "{Time}, {n} wanted to build a tower as tall as a tree. ");
    SAY(b, c, rng, "{P} worked hard all morning. ", "{P} got out everything {p} needed. ",
        "{P} asked {f} to help, and together they began. ");
    SAY(b, c, rng, "But it all fell down! ", "But it did not look right at all. ",
        "But then {p} dropped it on the floor. ");
    SAY(b, c, rng, "{N} felt {bad}. \"I will never get it right,\" {p} said.\n\n",
        "{N} wanted to give up.\n\n", "{N} sat down and sighed.\n\n");
    SAY(b, c, rng, "{A} {helper} saw {o} and said, \"Try again, slowly this time.\" ",
        "{F} said, \"It is okay. Let's try one more time.\" ",
        "Then {n} remembered what {s} grandma always said: try, try again. ");
    SAY(b, c, rng, "So {p} tried again, slowly and carefully. ", "This time {p} went step by step. ");
    SAY(b, c, rng, "And it worked! It was even better than before.",
        "At last it was done, and it looked wonderful.",
        "This time it was just right.");
    sb_puts(b, "\n\n");
    SAY(b, c, rng, "{N} was so {good}. ", "Everyone clapped for {n}. ",
        "{F} gave {o} a big hug. ");
}

static void ending(sbuf *b, const cast *c, uint64_t *rng) {
    SAY(b, c, rng, "From that day on, {n} and {f} were the best of friends. ",
        "That night, {n} went to bed with a smile. ", "When {p} got home, {p} told {s} family everything. ",
        "The sun went down, and it was time to go home. ");
    SAY(b, c, rng, "{N} learned that {lesson}.", "{P} knew now that {lesson}.",
        "And {n} never forgot that {lesson}.", "It was a day {n} would always remember.");
    sb_puts(b, "\n\n");
}

static void title(sbuf *b, const cast *c, uint64_t *rng) {
    size_t start = b->len;
    SAY(b, c, rng, "{N} and the {color} {obj}", "The {color} {obj}", "{N} and {f}",
        "A Day at {place}", "{N} Learns a Lesson", "The {trait} {k}");
    if (b->failed) return;
    /* Title case: capitalise every word but short joining words. */
    for (size_t i = start; i < b->len; i++) {
        bool word_start = i == start || b->s[i - 1] == ' ';
        bool small = strncmp(b->s + i, "and ", 4) == 0 || strncmp(b->s + i, "the ", 4) == 0 ||
                     strncmp(b->s + i, "a ", 2) == 0 || strncmp(b->s + i, "at ", 3) == 0;
        if (word_start && (i == start || !small)) b->s[i] = (char)toupper((unsigned char)b->s[i]);
    }
    sb_puts(b, "\n\n");
}

static void story(sbuf *b, uint64_t *rng) {
    cast c;
    make_cast(&c, rng);
    title(b, &c, rng);
    opening(b, &c, rng);
    switch (vkm_rng_below(rng, 4)) {
    case 0:
        c.lesson = PICK(rng, LESSONS_LOST);
        plot_lost(b, &c, rng);
        break;
    case 1:
        c.lesson = PICK(rng, LESSONS_SHARE);
        plot_share(b, &c, rng);
        break;
    case 2:
        c.lesson = PICK(rng, LESSONS_BRAVE);
        plot_brave(b, &c, rng);
        break;
    default:
        c.lesson = PICK(rng, LESSONS_MAKE);
        plot_make(b, &c, rng);
        break;
    }
    ending(b, &c, rng);
}

char *vkm_builtin_corpus(const vka_context *ctx, size_t bytes, size_t *len) {
    if (bytes == 0) bytes = CORPUS_DEFAULT_BYTES;
    uint64_t rng = CORPUS_SEED;
    sbuf out = {.ctx = ctx}, one = {.ctx = ctx};
    /* Whole stories while they fit; the first one is cut if bytes is smaller than a story. */
    while (!out.failed && !one.failed) {
        one.len = 0;
        story(&one, &rng);
        if (one.failed || out.len + one.len > bytes) {
            if (out.len == 0 && !one.failed) sb_put(&out, one.s, bytes);
            break;
        }
        sb_put(&out, one.s, one.len);
    }
    bool failed = out.failed || one.failed;
    vka_free(ctx, one.s);
    if (failed) {
        vka_free(ctx, out.s);
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = out.len;
    return out.s;
}

/* The caller frees it with free() (the header's contract): libc's memory, as there is no ctx. */
char *vka_builtin_corpus(size_t bytes, size_t *len) { return vkm_builtin_corpus(NULL, bytes, len); }
