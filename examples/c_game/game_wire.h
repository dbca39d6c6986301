/* What both example games need of PROTOCOL.md section 7: msgpack strings, a reply's fields, and its arrays
 * received by name (a header lists them in `arrays`; frame i + 1 holds the bytes of array i). */
#ifndef TANDEM_GAME_WIRE_H
#define TANDEM_GAME_WIRE_H

#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define TIMEOUT_MS 10000 /* the longest wait for one reply */
#define MAX_ARRAYS 8     /* the most arrays a reply to these games carries */
#define ARRAY_CAP 4096   /* the largest array frame they expect */

static void die(const char *why) { fprintf(stderr, "error: %s\n", why); exit(1); }

/* A game's link to its action server: a DEALER, and the buffer its headers are packed into. */
typedef struct { void *ctx, *sock; msgpack_sbuffer buf; msgpack_packer pk; } link_t;

static void link_open(link_t *l, const char *endpoint) {
    l->ctx = zmq_ctx_new();
    l->sock = zmq_socket(l->ctx, ZMQ_DEALER);
    int linger = 100; /* a bye still leaves; nothing holds the game's exit longer */
    zmq_setsockopt(l->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(l->sock, endpoint) != 0) die("cannot connect");
    msgpack_sbuffer_init(&l->buf);
    msgpack_packer_init(&l->pk, &l->buf, msgpack_sbuffer_write);
}

static void link_close(link_t *l) {
    msgpack_sbuffer_destroy(&l->buf);
    zmq_close(l->sock);
    zmq_ctx_term(l->ctx);
}

static void pack_str(msgpack_packer *pk, const char *s) {
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* The header of a step's array: name, dtype and shape (rank 1 or 2; rows < 0 means rank 1 of `cols`). */
static void pack_array(msgpack_packer *pk, const char *name, const char *dtype, long rows, long cols) {
    msgpack_pack_map(pk, 3);
    pack_str(pk, "name"); pack_str(pk, name);
    pack_str(pk, "dtype"); pack_str(pk, dtype);
    pack_str(pk, "shape");
    if (rows < 0) { msgpack_pack_array(pk, 1); msgpack_pack_long(pk, cols); }
    else { msgpack_pack_array(pk, 2); msgpack_pack_long(pk, rows); msgpack_pack_long(pk, cols); }
}

/* The fields of a reply these games need, and its arrays. */
typedef struct { char name[64]; size_t len; unsigned char data[ARRAY_CAP]; } array_t;
typedef struct {
    char kind[32]; char code[32]; int64_t request_id, version, stream; int fatal;
    int n_arrays; array_t arrays[MAX_ARRAYS];
} reply_t;

static void copy_str(char *dst, size_t cap, msgpack_object o) {
    size_t n = o.via.str.size < cap - 1 ? o.via.str.size : cap - 1;
    memcpy(dst, o.via.str.ptr, n);
    dst[n] = 0;
}

static int key_is(msgpack_object k, const char *s) {
    return k.type == MSGPACK_OBJECT_STR && k.via.str.size == strlen(s) && !memcmp(k.via.str.ptr, s, k.via.str.size);
}

/* An integer field's value; a field of another type reads as -1 (never a valid id, stream or version here). */
static int64_t int_of(msgpack_object v) {
    if (v.type == MSGPACK_OBJECT_NEGATIVE_INTEGER) return v.via.i64;
    return v.type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v.via.u64 : -1;
}

/* The array named `name` in a reply, or NULL. */
static const array_t *array_named(const reply_t *r, const char *name) {
    for (int i = 0; i < r->n_arrays; i++)
        if (!strcmp(r->arrays[i].name, name)) return &r->arrays[i];
    return NULL;
}

static void read_header(reply_t *r, msgpack_object_map m, int64_t *streams) {
    for (uint32_t i = 0; i < m.size; i++) {
        msgpack_object k = m.ptr[i].key, v = m.ptr[i].val;
        if (key_is(k, "kind") && v.type == MSGPACK_OBJECT_STR) copy_str(r->kind, sizeof r->kind, v);
        else if (key_is(k, "code") && v.type == MSGPACK_OBJECT_STR) copy_str(r->code, sizeof r->code, v);
        else if (key_is(k, "request_id")) r->request_id = int_of(v);
        else if (key_is(k, "stream")) r->stream = int_of(v);
        else if (key_is(k, "version")) r->version = int_of(v);
        else if (key_is(k, "fatal") && v.type == MSGPACK_OBJECT_BOOLEAN) r->fatal = v.via.boolean;
        else if (key_is(k, "streams") && v.type == MSGPACK_OBJECT_ARRAY && v.via.array.size > 0 && streams)
            *streams = int_of(v.via.array.ptr[0]);
        else if (key_is(k, "arrays") && v.type == MSGPACK_OBJECT_ARRAY) {
            if (v.via.array.size > MAX_ARRAYS) die("a reply with more arrays than this game expects");
            r->n_arrays = (int)v.via.array.size;
            for (uint32_t a = 0; a < v.via.array.size; a++) {
                msgpack_object d = v.via.array.ptr[a];
                if (d.type != MSGPACK_OBJECT_MAP) die("an array descriptor that is not a map");
                for (uint32_t j = 0; j < d.via.map.size; j++)
                    if (key_is(d.via.map.ptr[j].key, "name") && d.via.map.ptr[j].val.type == MSGPACK_OBJECT_STR)
                        copy_str(r->arrays[a].name, sizeof r->arrays[a].name, d.via.map.ptr[j].val);
            }
        }
    }
}

/* Receive one multipart message within TIMEOUT_MS: the header's fields, and each array frame under its name. */
static void receive(void *sock, reply_t *r, int64_t *streams) {
    zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, TIMEOUT_MS) <= 0) die("no reply from the action server within the timeout");
    zmq_msg_t msg;
    int part = 0, more = 1;
    memset(r, 0, sizeof *r);
    while (more) {
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, 0) < 0) die("receive failed");
        if (part == 0) {
            msgpack_unpacked up;
            msgpack_unpacked_init(&up);
            if (msgpack_unpack_next(&up, zmq_msg_data(&msg), zmq_msg_size(&msg), NULL) != MSGPACK_UNPACK_SUCCESS ||
                up.data.type != MSGPACK_OBJECT_MAP) die("a reply that is not a msgpack map");
            read_header(r, up.data.via.map, streams);
            msgpack_unpacked_destroy(&up);
        } else {
            size_t n = zmq_msg_size(&msg);
            if (part > r->n_arrays) die("more frames than the header lists arrays");
            if (n > ARRAY_CAP) die("an array frame larger than this game expects");
            memcpy(r->arrays[part - 1].data, zmq_msg_data(&msg), n);
            r->arrays[part - 1].len = n;
        }
        more = zmq_msg_more(&msg);
        zmq_msg_close(&msg);
        part++;
    }
}

static void send_header(void *sock, msgpack_sbuffer *buf, int more) {
    if (zmq_send(sock, buf->data, buf->size, more ? ZMQ_SNDMORE : 0) < 0) die("send failed");
}

static void send_frame(void *sock, const void *data, size_t len, int more) {
    if (zmq_send(sock, data, len, more ? ZMQ_SNDMORE : 0) < 0) die("send failed");
}

/* game_hello for one stream, the spaces nil (the server's): the stream the welcome gives, or exit 1. */
static int64_t hello(void *sock, msgpack_sbuffer *buf, msgpack_packer *pk, const char *game) {
    msgpack_sbuffer_clear(buf);
    msgpack_pack_map(pk, 6);
    pack_str(pk, "v"); msgpack_pack_int(pk, 1);
    pack_str(pk, "kind"); pack_str(pk, "game_hello");
    pack_str(pk, "request_id"); msgpack_pack_int(pk, 1);
    pack_str(pk, "game"); pack_str(pk, game);
    pack_str(pk, "streams"); msgpack_pack_int(pk, 1);
    pack_str(pk, "spaces"); msgpack_pack_nil(pk);
    send_header(sock, buf, 0);
    static reply_t r; /* its array buffers are large for a stack */
    int64_t stream = -1;
    receive(sock, &r, &stream);
    if (strcmp(r.kind, "game_welcome") != 0 || stream < 0) { fprintf(stderr, "%s %s\n", r.kind, r.code); die("no welcome"); }
    return stream;
}

/* The start of a game_step header (8 fields; `arrays` follows, packed by the caller). */
static void step_header(msgpack_packer *pk, int64_t request, int64_t stream, double reward, int done, int truncated) {
    msgpack_pack_map(pk, 8);
    pack_str(pk, "v"); msgpack_pack_int(pk, 1);
    pack_str(pk, "kind"); pack_str(pk, "game_step");
    pack_str(pk, "request_id"); msgpack_pack_int64(pk, request);
    pack_str(pk, "stream"); msgpack_pack_int64(pk, stream);
    pack_str(pk, "reward"); msgpack_pack_double(pk, reward);
    pack_str(pk, "done"); done ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    pack_str(pk, "truncated"); truncated ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    pack_str(pk, "arrays");
}

/* After a step's reply: 1 if the server said it stops (a `shutdown`: the run ended, or it restarts), 0 if the reply
 * answers `request` with an action or an episode's end; anything else ends the game with the reason. */
static int stopped_by(const reply_t *r, int64_t request) {
    if (strcmp(r->kind, "game_error") == 0 && r->fatal && strcmp(r->code, "shutdown") == 0) {
        fprintf(stderr, "the action server stopped (the run ended or it restarts)\n");
        return 1;
    }
    if (strcmp(r->kind, "game_error") == 0) { fprintf(stderr, "refused: %s\n", r->code); die("the server refused a step"); }
    if (strcmp(r->kind, "game_action") != 0 || r->request_id != request) die("an unexpected reply");
    return 0;
}

static void bye(void *sock, msgpack_sbuffer *buf, msgpack_packer *pk, int64_t request) {
    msgpack_sbuffer_clear(buf); /* no reply comes */
    msgpack_pack_map(pk, 4);
    pack_str(pk, "v"); msgpack_pack_int(pk, 1);
    pack_str(pk, "kind"); pack_str(pk, "game_bye");
    pack_str(pk, "request_id"); msgpack_pack_int64(pk, request);
    pack_str(pk, "reason"); pack_str(pk, "done");
    send_header(sock, buf, 0);
}

#endif
