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
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define TIMEOUT_MS 10000

static void die(const char *why) { fprintf(stderr, "error: %s\n", why); exit(1); }

static void pack_str(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* The fields of a reply this game needs. */
typedef struct { char kind[32]; char code[32]; int64_t request_id, version, stream; int fatal; } reply_t;

static void copy_str(char *dst, size_t cap, msgpack_object o) {
    size_t n = o.via.str.size < cap - 1 ? o.via.str.size : cap - 1;
    memcpy(dst, o.via.str.ptr, n);
    dst[n] = 0;
}

static int key_is(msgpack_object k, const char *s) {
    return k.type == MSGPACK_OBJECT_STR && k.via.str.size == strlen(s) && !memcmp(k.via.str.ptr, s, k.via.str.size);
}

/* Receive one multipart message within TIMEOUT_MS; parse the header; copy the first array frame to `array`. */
static void receive(void *sock, reply_t *r, void *array, size_t array_cap, size_t *array_len, int64_t *streams) {
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, TIMEOUT_MS) <= 0) die("no reply from the action server within the timeout");
    zmq_msg_t msg;
    int part = 0, more = 1;
    memset(r, 0, sizeof *r);
    *array_len = 0;
    while (more) {
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, 0) < 0) die("receive failed");
        if (part == 0) {
            msgpack_unpacked up;
            msgpack_unpacked_init(&up);
            if (msgpack_unpack_next(&up, zmq_msg_data(&msg), zmq_msg_size(&msg), NULL) != MSGPACK_UNPACK_SUCCESS ||
                up.data.type != MSGPACK_OBJECT_MAP) die("a reply that is not a msgpack map");
            msgpack_object_map m = up.data.via.map;
            for (uint32_t i = 0; i < m.size; i++) {
                msgpack_object k = m.ptr[i].key, v = m.ptr[i].val;
                if (key_is(k, "kind") && v.type == MSGPACK_OBJECT_STR) copy_str(r->kind, sizeof r->kind, v);
                else if (key_is(k, "code") && v.type == MSGPACK_OBJECT_STR) copy_str(r->code, sizeof r->code, v);
                else if (key_is(k, "request_id")) r->request_id = (int64_t)v.via.u64;
                else if (key_is(k, "stream")) r->stream = (int64_t)v.via.u64;
                else if (key_is(k, "version")) r->version = v.type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? v.via.i64 : (int64_t)v.via.u64;
                else if (key_is(k, "fatal") && v.type == MSGPACK_OBJECT_BOOLEAN) r->fatal = v.via.boolean;
                else if (key_is(k, "streams") && v.type == MSGPACK_OBJECT_ARRAY && v.via.array.size > 0 && streams)
                    *streams = (int64_t)v.via.array.ptr[0].via.u64;
            }
            msgpack_unpacked_destroy(&up);
        } else if (part == 1 && array) {
            size_t n = zmq_msg_size(&msg);
            if (n > array_cap) die("an action frame larger than expected");
            memcpy(array, zmq_msg_data(&msg), n);
            *array_len = n;
        }
        more = zmq_msg_more(&msg);
        zmq_msg_close(&msg);
        part++;
    }
}

static void send_header(void *sock, msgpack_sbuffer *buf, int more) {
    if (zmq_send(sock, buf->data, buf->size, more ? ZMQ_SNDMORE : 0) < 0) die("send failed");
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: cartpole_game ENDPOINT [STEPS]");
    long steps_wanted = argc > 2 ? atol(argv[2]) : 2000;
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 100;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(sock, argv[1]) != 0) die("cannot connect");

    msgpack_sbuffer buf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&buf);
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);

    /* hello: one stream, spaces nil (take the server's) */
    msgpack_pack_map(&pk, 6);
    pack_str(&pk, "v"); msgpack_pack_int(&pk, 1);
    pack_str(&pk, "kind"); pack_str(&pk, "game_hello");
    pack_str(&pk, "request_id"); msgpack_pack_int(&pk, 1);
    pack_str(&pk, "game"); pack_str(&pk, "c-cartpole");
    pack_str(&pk, "streams"); msgpack_pack_int(&pk, 1);
    pack_str(&pk, "spaces"); msgpack_pack_nil(&pk);
    send_header(sock, &buf, 0);
    reply_t r;
    int64_t stream = -1;
    size_t len;
    receive(sock, &r, NULL, 0, &len, &stream);
    if (strcmp(r.kind, "game_welcome") != 0 || stream < 0) { fprintf(stderr, "%s %s\n", r.kind, r.code); die("no welcome"); }

    /* CartPole-v1's physics, on this game's own loop */
    float s[4] = {0.01f, 0, -0.01f, 0};
    double reward = 0.0;
    int done = 0, truncated = 0, t = 0;
    long steps = 0, episodes = 0, request = 2;
    int64_t version = -1;
    unsigned seed = 12345;
    int stopped = 0;  /* the server said it stops: no bye to send, nothing more to wait for */
    while (steps < steps_wanted && !stopped) {
        msgpack_sbuffer_clear(&buf);
        msgpack_pack_map(&pk, 8);
        pack_str(&pk, "v"); msgpack_pack_int(&pk, 1);
        pack_str(&pk, "kind"); pack_str(&pk, "game_step");
        pack_str(&pk, "request_id"); msgpack_pack_int64(&pk, request);
        pack_str(&pk, "stream"); msgpack_pack_int64(&pk, stream);
        pack_str(&pk, "reward"); msgpack_pack_double(&pk, reward);
        pack_str(&pk, "done"); done ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
        pack_str(&pk, "truncated"); truncated ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
        pack_str(&pk, "arrays");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, 3);
        pack_str(&pk, "name"); pack_str(&pk, "obs");
        pack_str(&pk, "dtype"); pack_str(&pk, "<f4");  /* this machine is little-endian, as the wire is */
        pack_str(&pk, "shape"); msgpack_pack_array(&pk, 1); msgpack_pack_int(&pk, 4);
        send_header(sock, &buf, 1);
        if (zmq_send(sock, s, sizeof s, 0) < 0) die("send failed");
        int64_t action = 0;
        receive(sock, &r, &action, sizeof action, &len, NULL);
        if (strcmp(r.kind, "game_error") == 0 && r.fatal && strcmp(r.code, "shutdown") == 0) {
            /* the answer to this step, or a notice (request_id 0) that came first: either way the server is gone */
            fprintf(stderr, "the action server stopped (the run ended or it restarts)\n");
            stopped = 1;
            continue;
        }
        if (strcmp(r.kind, "game_error") == 0) { fprintf(stderr, "refused: %s\n", r.code); die("the server refused a step"); }
        if (strcmp(r.kind, "game_action") != 0 || r.request_id != request) die("an unexpected reply");
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
    if (!stopped) {
        msgpack_sbuffer_clear(&buf);  /* bye: no reply */
        msgpack_pack_map(&pk, 4);
        pack_str(&pk, "v"); msgpack_pack_int(&pk, 1);
        pack_str(&pk, "kind"); pack_str(&pk, "game_bye");
        pack_str(&pk, "request_id"); msgpack_pack_int64(&pk, request);
        pack_str(&pk, "reason"); pack_str(&pk, "done");
        send_header(sock, &buf, 0);
    }
    printf("steps %ld episodes %ld version %lld\n", steps, episodes, (long long)version);
    msgpack_sbuffer_destroy(&buf);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return 0;
}
