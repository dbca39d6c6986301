/* A game with a varying set of units, in C: Skirmish (examples/entity_skirmish.py) on this game's own loop, each
 * step's units and enemies sent to a Tandem action server as entities, one action per unit asked back.
 *
 *   tandem up examples/game_skirmish.toml
 *   make && ./skirmish_game tcp://127.0.0.1:PORT [STEPS] [SEED]
 *
 * Written from protocol/PROTOCOL.md 7.6: a step carries `obs.unit` [n, 3] and `obs.enemy` [m, 3] (x, y, hp; any
 * n from 1 to 4 and m from 1 to 6 this step), `obs.global` [1] (the episode's progress) and `obs.targets:target`
 * [m] (which enemies may be fired at: wrecks may not); the reply carries `action.target` [n] (each unit's target,
 * the place of an enemy among the step's enemies) and `action.stance` [n] (0 advance, 1 hold). A unit earns 1 for
 * firing at the living enemy nearest to it and 0.5 for holding when its hp is under 0.5 or advancing otherwise,
 * shared over the step's units (random play: about 0.7 a step). Prints "steps N episodes M version V mean_reward R"
 * and exits 0 (also on the server's `shutdown`), or 1 with a reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>

#include "game_wire.h"

#define MAX_UNITS 4
#define MAX_ENEMIES 6
#define LENGTH 16 /* steps in an episode */

typedef struct {
    int n, m, t;
    float units[MAX_UNITS][3], enemies[MAX_ENEMIES][3], progress;
    bool alive[MAX_ENEMIES];
} field_t;

static float uniform(unsigned *seed) { return (float)(rand_r(seed) % 100000) / 100000.0f; }

/* A new field each step, as the Python game draws it. */
static void draw(field_t *f, unsigned *seed) {
    f->n = 1 + rand_r(seed) % MAX_UNITS;
    f->m = 1 + rand_r(seed) % MAX_ENEMIES;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < 3; k++) f->units[i][k] = uniform(seed);
    for (int j = 0; j < f->m; j++) {
        for (int k = 0; k < 3; k++) f->enemies[j][k] = uniform(seed);
        if (uniform(seed) < 0.2f) f->enemies[j][2] = 0.0f; /* a wreck */
    }
    float first = f->enemies[0][2];
    f->enemies[rand_r(seed) % f->m][2] = first > 0.1f ? first : 0.1f; /* at least one enemy lives */
    for (int j = 0; j < f->m; j++) f->alive[j] = f->enemies[j][2] > 0.0f;
    f->progress = (float)f->t / LENGTH;
}

static void send_step(link_t *l, const field_t *f, int64_t request, int64_t stream, double reward, bool truncated) {
    msgpack_sbuffer_clear(&l->buf);
    step_header(&l->pk, request, stream, reward, false, truncated);
    msgpack_pack_array(&l->pk, 4);
    pack_array(&l->pk, "obs.unit", "<f4", f->n, 3);
    pack_array(&l->pk, "obs.enemy", "<f4", f->m, 3);
    pack_array(&l->pk, "obs.global", "<f4", -1, 1);
    pack_array(&l->pk, "obs.targets:target", "|b1", -1, f->m);
    send_header(l->sock, &l->buf, 1);
    send_frame(l->sock, f->units, sizeof(float) * 3 * f->n, 1);
    send_frame(l->sock, f->enemies, sizeof(float) * 3 * f->m, 1);
    send_frame(l->sock, &f->progress, sizeof f->progress, 1);
    send_frame(l->sock, f->alive, (size_t)f->m, 0); /* bool is one byte of 0 or 1 here, as |b1 is */
}

/* One action per unit, checked as the protocol promises: `name` holds n int64 entries, each in [lo, hi). */
static const int64_t *per_unit(const reply_t *r, const char *name, int n, int64_t lo, int64_t hi) {
    const array_t *a = array_named(r, name);
    if (!a || a->len != sizeof(int64_t) * (size_t)n) die("a reply without one action per unit");
    const int64_t *v = (const int64_t *)(const void *)a->data;
    for (int i = 0; i < n; i++)
        if (v[i] < lo || v[i] >= hi) die("an action out of its range");
    return v;
}

/* The reward of a step's actions: firing at the nearest living enemy, and the stance that fits the unit's hp. */
static double score(const field_t *f, const int64_t *target, const int64_t *stance) {
    double total = 0.0;
    for (int i = 0; i < f->n; i++) {
        int nearest = -1;
        float best = INFINITY;
        for (int j = 0; j < f->m; j++) {
            float dx = f->units[i][0] - f->enemies[j][0], dy = f->units[i][1] - f->enemies[j][1];
            float d = sqrtf(dx * dx + dy * dy);
            if (f->alive[j] && d < best) { best = d; nearest = j; }
        }
        if (target[i] >= 0 && !f->alive[target[i]]) die("a unit fired at a wreck, which the mask forbids");
        total += (target[i] == nearest) + 0.5 * (stance[i] == (f->units[i][2] < 0.5f));
    }
    return total / f->n;
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: skirmish_game ENDPOINT [STEPS] [SEED]");
    long steps_wanted = argc > 2 ? atol(argv[2]) : 2000;
    unsigned seed = argc > 3 ? (unsigned)atol(argv[3]) : 12345u;
    link_t l;
    link_open(&l, argv[1]);
    int64_t stream = hello(l.sock, &l.buf, &l.pk, "c-skirmish");

    static reply_t r; /* its array buffers are large for a stack */
    field_t f = {0};
    draw(&f, &seed);
    double reward = 0.0, total = 0.0;
    bool truncated = false, stopped = false;
    long steps = 0, episodes = 0;
    int64_t request = 2, version = -1;
    while (steps < steps_wanted && !stopped) {
        send_step(&l, &f, request, stream, reward, truncated);
        receive(l.sock, &r, NULL);
        if (stopped_by(&r, request)) { stopped = true; continue; }
        request++;
        version = r.version;
        if (truncated) { /* the server acknowledged the episode's end: start the next one */
            if (r.n_arrays != 0) die("an action after an episode's end");
            episodes++;
            f.t = 0;
            draw(&f, &seed);
            reward = 0.0;
            truncated = false;
            continue;
        }
        const int64_t *target = per_unit(&r, "action.target", f.n, -1, f.m);
        const int64_t *stance = per_unit(&r, "action.stance", f.n, -1, 2);
        reward = score(&f, target, stance);
        total += reward;
        steps++;
        f.t++;
        truncated = f.t >= LENGTH;
        draw(&f, &seed);
    }
    if (!stopped) bye(l.sock, &l.buf, &l.pk, request);
    printf("steps %ld episodes %ld version %lld mean_reward %.3f\n", steps, episodes, (long long)version,
           total / (steps ? steps : 1));
    link_close(&l);
    return 0;
}
