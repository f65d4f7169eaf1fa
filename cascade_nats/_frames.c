/* The firehose's frames cut out of what a Wire received, for cascade_nats.firehose.
 *
 * Replay reads several hundred thousand stream messages a second, and in Python the protocol
 * line of each (split, ints, slices) and its JetStream ack subject cost about 4 us a message,
 * as much as decoding the event. This does the same for the messages that are stream
 * messages of the consumer, in order, and hands every other thing back to Python (the
 * Wire's own parser and the firehose's rules): control messages (heartbeats, flow control),
 * PING, -ERR, a reply that is no ack subject.
 *
 * A message is `MSG <subject> <sid> [reply] <size>` or `HMSG <subject> <sid> [reply]
 * <header size> <size>`, a CRLF, its body (header then payload), a CRLF. Its reply is the ack
 * subject $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<time>.<pending>, or
 * with <domain>.<account> after ACK and a random token at the end (12 tokens): the
 * firehose's `_position`.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { MORE = 0, OTHER = 1, GAP = 2 };

typedef struct {
    const char *p;
    Py_ssize_t n;
} span;

/* `n` bytes at `p` split on `sep` (every one: empty pieces count), into at most `max`
 * spans; -1 if there are more. memchr, as the pieces are long (subjects). */
static int split(const char *p, Py_ssize_t n, char sep, span *out, int max) {
    int count = 0;
    const char *end = p + n;
    while (1) {
        const char *at = memchr(p, sep, (size_t)(end - p));
        if (count == max) return -1;
        out[count].p = p;
        out[count].n = (at == NULL ? end : at) - p;
        count++;
        if (at == NULL) return count;
        p = at + 1;
    }
}

/* A number of decimal digits only (what the server writes), or -1. */
static long long digits(span s) {
    if (s.n == 0 || s.n > 18) return -1;
    long long v = 0;
    for (Py_ssize_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9') return -1;
        v = v * 10 + (s.p[i] - '0');
    }
    return v;
}

static int equal(span s, const char *text, Py_ssize_t n) { return s.n == n && memcmp(s.p, text, (size_t)n) == 0; }

/* Stream sequence, consumer sequence and pending count from an ack subject; 0 if it is none. */
static int position(span reply, long long *sseq, long long *cseq, long long *pending) {
    span tokens[13];
    int count = split(reply.p, reply.n, '.', tokens, 13);
    if (count < 9 || (count != 9 && count < 11) || !equal(tokens[0], "$JS", 3) || !equal(tokens[1], "ACK", 3)) return 0;
    int at = count == 9 ? 5 : 7;
    *sseq = digits(tokens[at]);
    *cseq = digits(tokens[at + 1]);
    *pending = digits(tokens[at + 3]);
    return *sseq >= 0 && *cseq >= 0 && *pending >= 0;
}

static PyObject *result(Py_ssize_t pos, long long last, long long pending, int stop) {
    return Py_BuildValue("(nLLi)", pos, last, pending, stop);
}

/* (sseq, subject, payload) appended to `frames`; -1 on an error. */
static int append(PyObject *frames, long long sseq, span subject, const char *payload, Py_ssize_t n) {
    PyObject *frame = PyTuple_New(3);
    if (frame == NULL) return -1;
    PyObject *items[3] = {PyLong_FromLongLong(sseq), PyBytes_FromStringAndSize(subject.p, subject.n),
                          PyBytes_FromStringAndSize(payload, n)};
    for (int i = 0; i < 3; i++) {
        if (items[i] == NULL) {
            for (int j = 0; j < 3; j++) Py_XDECREF(items[j]);
            Py_DECREF(frame);
            return -1;
        }
    }
    for (int i = 0; i < 3; i++) PyTuple_SET_ITEM(frame, i, items[i]);
    /* An int and two bytes make no cycle: out of the collector's sight, as CPython leaves such
     * a tuple once a collection has seen it. A replay makes 400,000 of them, and each young
     * collection walked those still waiting (bench/README.md). */
    PyObject_GC_UnTrack(frame);
    int failed = PyList_Append(frames, frame);
    Py_DECREF(frame);
    return failed;
}

PyDoc_STRVAR(take_doc,
             "take(buffer, pos, sid, delivered, frames, /) -> (pos, delivered, pending, stop)\n\n"
             "Append to `frames` (stream sequence, subject, payload) of each stream message of\n"
             "subscription `sid` in `buffer` from `pos` on, skipping other subscriptions'\n"
             "messages, while their consumer sequences follow `delivered`. Returns where it\n"
             "stopped, the last consumer sequence taken, the last pending count (-1: none taken)\n"
             "and why: MORE (the buffer ends before a whole message), OTHER (what is at `pos` is\n"
             "for Python to read: no stream message of `sid`) or GAP (the message at `pos` is not\n"
             "the one after `delivered`).");

static PyObject *take(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[2]) || !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "take(buffer: bytes, pos: int, sid: bytes, delivered: int, frames: list)");
        return NULL;
    }
    const char *buf = PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    long long delivered = PyLong_AsLongLong(args[3]);
    if (delivered == -1 && PyErr_Occurred()) return NULL;
    span sid = {PyBytes_AS_STRING(args[2]), PyBytes_GET_SIZE(args[2])};
    PyObject *frames = args[4];
    long long pending = -1;
    if (pos < 0 || pos > size) {
        PyErr_SetString(PyExc_ValueError, "pos is outside the buffer");
        return NULL;
    }
    while (1) {
        const char *line = buf + pos;
        const char *eol = memmem(line, (size_t)(size - pos), "\r\n", 2);
        if (eol == NULL) return result(pos, delivered, pending, MORE);
        span f[6];
        int count = split(line, eol - line, ' ', f, 6);
        int headers = count > 0 && equal(f[0], "HMSG", 4);
        if (count < 0 || !(headers || (count > 0 && equal(f[0], "MSG", 3))) || count < (headers ? 5 : 4) ||
            count > (headers ? 6 : 5))
            return result(pos, delivered, pending, OTHER);
        long long body = digits(f[count - 1]);
        long long header = headers ? digits(f[count - 2]) : 0;
        if (body < 0 || header < 0 || header > body) return result(pos, delivered, pending, OTHER);
        Py_ssize_t start = eol + 2 - buf;
        if (start + body + 2 > size) return result(pos, delivered, pending, MORE);
        if (!equal(f[2], sid.p, sid.n)) {  // for a consumer already replaced
            pos = start + (Py_ssize_t)body + 2;
            continue;
        }
        if (header && header == body && body >= 12 && memcmp(buf + start, "NATS/1.0 100", 12) == 0)
            return result(pos, delivered, pending, OTHER);  // a heartbeat or flow control
        int has_reply = count == (headers ? 6 : 5);
        long long sseq, cseq, left;
        if (!has_reply || !position(f[3], &sseq, &cseq, &left)) return result(pos, delivered, pending, OTHER);
        if (cseq != delivered + 1) return result(pos, delivered, pending, GAP);
        if (append(frames, sseq, f[1], buf + start + header, (Py_ssize_t)(body - header))) return NULL;
        delivered = cseq;
        pending = left;
        pos = start + (Py_ssize_t)body + 2;
    }
}

static PyMethodDef methods[] = {
    {"take", (PyCFunction)(void (*)(void))take, METH_FASTCALL, take_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "cascade_nats._frames", .m_doc = "The firehose's frames (see _frames.c).",
    .m_size = 0, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__frames(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "MORE", MORE) || PyModule_AddIntConstant(m, "OTHER", OTHER) ||
        PyModule_AddIntConstant(m, "GAP", GAP)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
