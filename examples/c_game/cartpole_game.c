/* A game with its own loop, in C: CartPole physics here, each action asked of a Tandem action server.
 *
 *   make && ./cartpole_game tcp://127.0.0.1:PORT [STEPS]
 *
 * Written from protocol/PROTOCOL.md section 7 alone: a DEALER socket, msgpack headers, the observation as
 * a raw little-endian float32 frame. Prints "steps N episodes M version V" and exits 0 (also when the server
 * says it stops: a `shutdown` notice, at the end of the run or before a restart), or 1 with a reason.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "game_wire.h"

int main(int argc, char **argv) {
    if (argc < 2) die("usage: cartpole_game ENDPOINT [STEPS]");
    long steps_wanted = argc > 2 ? atol(argv[2]) : 2000;
    link_t l;
    link_open(&l, argv[1]);
    int64_t stream = hello(l.sock, &l.buf, &l.pk, "c-cartpole");
    static reply_t r; /* its array buffers are large for a stack */

    /* CartPole-v1's physics, on this game's own loop */
    float s[4] = {0.01f, 0, -0.01f, 0};
    double reward = 0.0;
    int done = 0, truncated = 0, t = 0;
    long steps = 0, episodes = 0, request = 2;
    int64_t version = -1;
    unsigned seed = 12345;
    int stopped = 0;  /* the server said it stops: no bye to send, nothing more to wait for */
    while (steps < steps_wanted && !stopped) {
        msgpack_sbuffer_clear(&l.buf);
        step_header(&l.pk, request, stream, reward, done, truncated);
        msgpack_pack_array(&l.pk, 1);
        pack_array(&l.pk, "obs", "<f4", -1, 4); /* this machine is little-endian, as the wire is */
        send_header(l.sock, &l.buf, 1);
        send_frame(l.sock, s, sizeof s, 0);
        receive(l.sock, &r, NULL);
        if (stopped_by(&r, request)) { stopped = 1; continue; }
        const array_t *acted = array_named(&r, "action");
        size_t len = acted ? acted->len : 0;
        int64_t action = 0;
        if (len == sizeof action) memcpy(&action, acted->data, sizeof action);
        request++;
        version = r.version;
        if (done || truncated) {  /* the server acknowledged the episode's end: start the next one */
            if (len != 0) die("an action after an episode's end");
            episodes++;
            for (int i = 0; i < 4; i++) s[i] = ((float)(rand_r(&seed) % 1000) / 1000.0f - 0.5f) * 0.1f;
            reward = 0.0; done = truncated = 0; t = 0;
            continue;
        }
        if (len != sizeof action || (action != 0 && action != 1)) die("an action that is not 0 or 1");
        double force = action ? 10.0 : -10.0, costh = cos(s[2]), sinth = sin(s[2]);
        double temp = (force + 0.05 * s[3] * s[3] * sinth) / 1.1;
        double thetaacc = (9.8 * sinth - costh * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costh * costh / 1.1));
        double xacc = temp - 0.05 * thetaacc * costh / 1.1;
        s[0] += 0.02f * s[1]; s[1] += 0.02f * (float)xacc; s[2] += 0.02f * s[3]; s[3] += 0.02f * (float)thetaacc;
        steps++; t++;
        reward = 1.0;
        done = s[0] < -2.4f || s[0] > 2.4f || s[2] < -0.2095f || s[2] > 0.2095f;
        truncated = !done && t >= 500;
    }
    if (!stopped) bye(l.sock, &l.buf, &l.pk, request);
    printf("steps %ld episodes %ld version %lld\n", steps, episodes, (long long)version);
    link_close(&l);
    return 0;
}
