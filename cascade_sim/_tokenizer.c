/* The stats block tokenizer: cuts every value out of a stats block and writes the block's
 * stats map as its event packs it (a float64 per name, the texts by position), for
 * cascade_sim.logparse.parse_stats. No dict and no float object is made: a map built only to
 * be packed cost as much as cutting its values out (bench/README.md).
 *
 * What a value is, is docs/stats-naming.md ("Values"); its definition as one regex is
 * REFERENCE in tests/cascade_sim/test_tokenizer.py, which checks this file against it on
 * every shared log and on generated blocks. This is that regex matched by hand: a value
 * starts on one of `-+.0-9ni` not right after one of `-A-Za-z0-9_.[`, and is
 *   - a number: digits with an optional fraction (`1`, `1.`, `1.5`) or a fraction alone
 *     (`.5`), after an optional sign, with an optional exponent (`1e-05`), not followed by
 *     a digit, `.`, `:`, `==` or ` ==` (if only its exponent is, it ends before the exponent);
 *   - `nan` or `inf` after an optional sign, or `none`, not followed by a word character;
 * and it takes the spaces and tabs after it. The skeleton is the text between values, each
 * piece without the spaces and tabs at its end, joined by statnames.VALUE ("\0"). A number
 * is what Python's float() reads of it (correctly rounded), nan and inf too, and `none` is
 * the text "none".
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* --- characters ------------------------------------------------------------------------ */

enum { START = 1, GLUE = 2, WORD = 4, DIGIT = 8 };
static unsigned char cls[256];

static void init_classes(void) {
    for (int c = '0'; c <= '9'; c++) cls[c] |= START | GLUE | WORD | DIGIT;
    for (int c = 'a'; c <= 'z'; c++) cls[c] |= GLUE | WORD;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] |= GLUE | WORD;
    cls['_'] |= GLUE | WORD;
    cls['-'] |= START | GLUE;
    cls['.'] |= START | GLUE;
    cls['['] |= GLUE;
    cls['+'] |= START;
    cls['n'] |= START;
    cls['i'] |= START;
}

typedef const unsigned char *text;

/* Where a value may start: on a START character not right after a GLUE one. */
static inline int may_start(text s, Py_ssize_t p) {
    return (cls[s[p]] & START) && (p == 0 || !(cls[s[p - 1]] & GLUE));
}

#ifdef __SSE2__
#include <emmintrin.h>

static inline __m128i within(__m128i x, char lo, char hi) {
    __m128i t = _mm_sub_epi8(x, _mm_set1_epi8(lo)), k = _mm_set1_epi8((char)(hi - lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(t, k), t);
}

static inline __m128i is(__m128i x, char c) { return _mm_cmpeq_epi8(x, _mm_set1_epi8(c)); }

/* may_start(s, p + i) for i in 0..15, as bits; p >= 1 and p + 16 <= n. */
static inline unsigned starts16(text s, Py_ssize_t p) {
    __m128i x = _mm_loadu_si128((const __m128i *)(s + p)), b = _mm_loadu_si128((const __m128i *)(s + p - 1));
    __m128i start = _mm_or_si128(_mm_or_si128(within(x, '0', '9'), _mm_or_si128(is(x, '-'), is(x, '+'))),
                                 _mm_or_si128(is(x, '.'), _mm_or_si128(is(x, 'n'), is(x, 'i'))));
    __m128i glue = _mm_or_si128(_mm_or_si128(within(b, '0', '9'), within(_mm_or_si128(b, _mm_set1_epi8(0x20)), 'a', 'z')),
                                _mm_or_si128(_mm_or_si128(is(b, '_'), is(b, '-')), _mm_or_si128(is(b, '.'), is(b, '['))));
    return (unsigned)_mm_movemask_epi8(_mm_andnot_si128(glue, start));
}
#endif

/* The first p' >= p where a value may start, or n: 16 characters at a time where SSE2 is
 * (every x86-64), one at a time elsewhere. */
static Py_ssize_t next_start(text s, Py_ssize_t p, Py_ssize_t n) {
#ifdef __SSE2__
    if (p == 0 && n > 0 && may_start(s, 0)) return 0;
    for (p = p > 1 ? p : 1; p + 16 <= n; p += 16) {
        unsigned bits = starts16(s, p);
        if (bits) return p + __builtin_ctz(bits);
    }
#endif
    for (; p < n; p++)
        if (may_start(s, p)) return p;
    return n;
}

/* --- values ----------------------------------------------------------------------------- */

/* A value as read: a number's digits as an integer (when it has at most 15 significant
 * digits, so that they are an exact double) and the power of ten to scale it by. */
typedef struct {
    enum { NUMBER, NAN_, INF_, NONE } kind;
    int negative, significant, scale;
    uint64_t mantissa;
} token;

static Py_ssize_t digits(text s, Py_ssize_t i, Py_ssize_t n, token *t, int fraction) {
    for (; i < n && (cls[s[i]] & DIGIT); i++) {
        unsigned digit = s[i] - '0';
        if (t->mantissa == 0 && digit == 0) { /* a leading zero */
            t->scale -= fraction;
        } else if (++t->significant <= 15) {
            t->mantissa = t->mantissa * 10 + digit;
            t->scale -= fraction;
        }
    }
    return i;
}

/* The end of the exponent at i, or i if there is none; its value in *value (a value past
 * 9999 counts as 10000: too far for the exact path either way). */
static Py_ssize_t exponent(text s, Py_ssize_t i, Py_ssize_t n, int *value) {
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        Py_ssize_t j = i + 1;
        int negative = j < n && s[j] == '-';
        if (j < n && (s[j] == '-' || s[j] == '+')) j++;
        int e = 0;
        Py_ssize_t k = j;
        for (; k < n && (cls[s[k]] & DIGIT); k++) e = e < 10000 ? e * 10 + (s[k] - '0') : 10000;
        if (k > j) {
            *value = negative ? -e : e;
            return k;
        }
    }
    return i;
}

/* (?![0-9.:]| ?==) */
static int number_may_end(text s, Py_ssize_t i, Py_ssize_t n) {
    if (i < n && ((cls[s[i]] & DIGIT) || s[i] == '.' || s[i] == ':')) return 0;
    if (i < n && s[i] == ' ') i++;
    return !(i + 1 < n && s[i] == '=' && s[i + 1] == '=');
}

/* The end of the number whose digits (or fraction, if s[i] is '.') start at i, or -1. Its
 * digits and fraction are taken whole (fewer would leave a digit or '.' next, which ends no
 * number); only the exponent may be given back. */
static Py_ssize_t number(text s, Py_ssize_t i, Py_ssize_t n, token *t) {
    if (s[i] == '.') {
        Py_ssize_t j = digits(s, i + 1, n, t, 1);
        if (j == i + 1) return -1;
        i = j;
    } else {
        i = digits(s, i, n, t, 0);
        if (i < n && s[i] == '.') i = digits(s, i + 1, n, t, 1);
    }
    int e = 0;
    Py_ssize_t end = exponent(s, i, n, &e);
    if (number_may_end(s, end, n)) {
        t->scale += e;
        return end;
    }
    return end > i ? i : -1; /* without its exponent, `e` or `E` comes next: that ends it */
}

static int word_ends(text s, Py_ssize_t i, Py_ssize_t n, const char *word, Py_ssize_t len) {
    return i + len <= n && memcmp(s + i, word, (size_t)len) == 0 && (i + len == n || !(cls[s[i + len]] & WORD));
}

/* The end of the value starting at p, read into *t, or -1 if no value starts there. */
static Py_ssize_t value_end(text s, Py_ssize_t p, Py_ssize_t n, token *t) {
    *t = (token){NUMBER, 0, 0, 0, 0};
    unsigned char c = s[p];
    if ((cls[c] & DIGIT) || c == '.') return number(s, p, n, t);
    if (c == 'n') {
        if (word_ends(s, p, n, "nan", 3)) return t->kind = NAN_, p + 3;
        return word_ends(s, p, n, "none", 4) ? (t->kind = NONE, p + 4) : -1;
    }
    if (c == 'i') return word_ends(s, p, n, "inf", 3) ? (t->kind = INF_, p + 3) : -1;
    t->negative = c == '-'; /* a sign */
    Py_ssize_t q = p + 1;
    if (q < n && ((cls[s[q]] & DIGIT) || s[q] == '.')) return number(s, q, n, t);
    if (word_ends(s, q, n, "nan", 3)) return t->kind = NAN_, q + 3;
    return word_ends(s, q, n, "inf", 3) ? (t->kind = INF_, q + 3) : -1;
}

/* float(s[0:len]) by float()'s own conversion: past the largest double, inf. */
static double slow_double(text s, Py_ssize_t len) {
    char small_buf[64];
    char *buf = len < (Py_ssize_t)sizeof small_buf ? small_buf : PyMem_Malloc((size_t)len + 1);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1.0;
    }
    memcpy(buf, s, (size_t)len);
    buf[len] = '\0';
    double d = PyOS_string_to_double(buf, NULL, NULL);
    if (buf != small_buf) PyMem_Free(buf);
    return d;
}

static const double exact_powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* nan and inf as float() reads them, signed [0] or not [1], bit for bit: read once. */
static double nans[2], infs[2];

/* The number s[0:len], read as *t, as float() reads it; -1.0 with an error set if it fails. */
static double number_of(const token *t, text s, Py_ssize_t len) {
    if (t->kind == NAN_) return nans[!t->negative];
    if (t->kind == INF_) return infs[!t->negative];
    if (t->significant <= 15 && t->scale >= -22 && t->scale <= 22) {
        /* Digits and power of ten are exact doubles, so one multiplication or division
         * rounds correctly, as float() does. */
        double d = t->scale < 0 ? (double)t->mantissa / exact_powers[-t->scale] : (double)t->mantissa * exact_powers[t->scale];
        return t->negative ? -d : d;
    }
    return slow_double(s, len);
}

/* --- the map ---------------------------------------------------------------------------- */

/* Room for a block's values and skeleton. One is kept from a call to the next: freeing
 * hundreds of KB each time would hand the pages back, to be faulted in again. */
typedef struct {
    double *values;
    unsigned char *is_none; /* the value is the text `none` */
    Py_ssize_t values_size;
    char *skeleton;
    Py_ssize_t skeleton_size;
} room;

static int grow(void **buf, Py_ssize_t *size, Py_ssize_t needed, size_t item) {
    if (needed <= *size) return 0;
    Py_ssize_t larger = needed > 2 * *size ? needed : 2 * *size;
    void *more = PyMem_Realloc(*buf, (size_t)larger * item);
    if (more == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = more;
    *size = larger;
    return 0;
}

static int grow_values(room *r, Py_ssize_t needed) {
    if (needed <= r->values_size) return 0;
    Py_ssize_t size = r->values_size;
    if (grow((void **)&r->values, &size, needed, sizeof(double)) < 0) return -1;
    void *more = PyMem_Realloc(r->is_none, (size_t)size);
    if (more == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->is_none = more;
    r->values_size = size;
    return 0;
}

static Py_ssize_t skeleton_piece(text s, Py_ssize_t from, Py_ssize_t to, char *out) {
    while (to > from && (s[to - 1] == ' ' || s[to - 1] == '\t')) to--;
    memcpy(out, s + from, (size_t)(to - from));
    return to - from;
}

/* The values of s[0:n], in r->values and r->is_none, and its skeleton, in r->skeleton (n
 * bytes are enough: each separator stands for a value of one character or more). Returns
 * the number of values, or -1 with an error set. */
static Py_ssize_t cut(text s, Py_ssize_t n, room *r, Py_ssize_t *skeleton_len, Py_ssize_t *nones) {
    Py_ssize_t count = 0, piece = 0, out = 0;
    if (grow((void **)&r->skeleton, &r->skeleton_size, n + 1, 1) < 0) return -1;
    for (Py_ssize_t p = next_start(s, 0, n); p < n; p = next_start(s, p, n)) {
        token t;
        Py_ssize_t end = value_end(s, p, n, &t);
        if (end < 0) {
            p++;
            continue;
        }
        if (grow_values(r, count + 1) < 0) return -1;
        r->is_none[count] = t.kind == NONE;
        *nones += t.kind == NONE;
        if (t.kind != NONE) {
            double d = number_of(&t, s + p, end - p);
            if (d == -1.0 && PyErr_Occurred()) return -1;
            r->values[count] = d;
        }
        count++;
        out += skeleton_piece(s, piece, p, r->skeleton + out);
        r->skeleton[out++] = '\0';
        while (end < n && (s[end] == ' ' || s[end] == '\t')) end++;
        piece = p = end;
    }
    *skeleton_len = out + skeleton_piece(s, piece, n, r->skeleton + out);
    return count;
}

/* The room kept, and whether a call is using it: layout_of runs Python, which may let
 * another thread call stats(), and that call takes room of its own. */
static room kept;
static int kept_in_use;
static PyObject *none_str, *names_str, *slots_str;

/* Positions as ints, made once: a block has hundreds of `none` texts, each by its position,
 * and making their ints anew was a tenth of the parse. */
static PyObject **positions;
static Py_ssize_t positions_made;

static PyObject *position(Py_ssize_t at) {
    if (at >= positions_made) {
        PyObject **more = PyMem_Realloc(positions, (size_t)(at + 1024) * sizeof(PyObject *));
        if (more == NULL) return PyErr_NoMemory();
        positions = more;
        for (; positions_made < at + 1024; positions_made++)
            if ((positions[positions_made] = PyLong_FromSsize_t(positions_made)) == NULL) return NULL;
    }
    return positions[at];
}

/* The block's map, as (floats, texts), from its values and its layout's slots. */
static PyObject *placed(const room *r, Py_ssize_t count, Py_ssize_t nones, PyObject *layout, PyObject *kernel_name) {
    PyObject *names = PyObject_GetAttr(layout, names_str), *slots = NULL, *floats = NULL, *texts = NULL;
    if (names == NULL || (slots = PyObject_GetAttr(layout, slots_str)) == NULL) goto fail;
    if (!PyTuple_Check(names) || !PyBytes_Check(slots) || PyBytes_GET_SIZE(slots) != count * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_Format(PyExc_ValueError, "layout_of must give a layout of names (a tuple) and slots (bytes, an int32 for each of %zd values)", count);
        goto fail;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(names);
    if (size < 1 || (floats = PyBytes_FromStringAndSize(NULL, size * (Py_ssize_t)sizeof(double))) == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a layout's names start with kernel_name");
        goto fail;
    }
    PyObject *zero = position(0);
    if (zero == NULL || (texts = _PyDict_NewPresized(nones + 1)) == NULL || PyDict_SetItem(texts, zero, kernel_name) < 0) goto fail;
    double *out = (double *)PyBytes_AS_STRING(floats);
    const int32_t *slot = (const int32_t *)PyBytes_AS_STRING(slots);
    out[0] = Py_NAN;
    for (Py_ssize_t k = 0; k < count; k++) {
        int32_t at = slot[k];
        if (at < 0) continue;
        if (at >= size) {
            PyErr_Format(PyExc_ValueError, "a layout's slot %d is past its %zd names", (int)at, size);
            goto fail;
        }
        if (r->is_none[k]) {
            out[at] = Py_NAN;
            PyObject *key = position(at);
            if (key == NULL || PyDict_SetItem(texts, key, none_str) < 0) goto fail;
        } else {
            out[at] = r->values[k];
            /* Names are unique but for `kernel_name`, which a line of the block may name
             * again: as in a dict, the later value takes its place. */
            if (at == 0 && PyDict_DelItem(texts, zero) < 0) PyErr_Clear();
        }
    }
    Py_DECREF(names);
    Py_DECREF(slots);
    return Py_BuildValue("(NN)", floats, texts);
fail:
    Py_XDECREF(names);
    Py_XDECREF(slots);
    Py_XDECREF(floats);
    Py_XDECREF(texts);
    return NULL;
}

static const char stats_doc[] =
    "stats(text, start, end, kernel_name, layout_of, /)\n--\n\n"
    "The stats map of the block text[start:end], its first line cut off, as (layout, floats,\n"
    "texts). `layout_of(skeleton)` gives the layout of blocks printed so: its `names` (the\n"
    "map's, `kernel_name` first) and `slots` (an int32 per value in the machine's byte order,\n"
    "the value's position among the names, or -1 for a value not stored). floats holds a\n"
    "float64 per name in the machine's byte order, a nan where texts ({position: str}) has the\n"
    "value: `kernel_name` at 0, each `none`.";

static PyObject *stats(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "stats(text: str, start: int, end: int, kernel_name, layout_of)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) return NULL;
    if (start < 0 || end < start || end > PyUnicode_GET_LENGTH(args[0])) {
        PyErr_SetString(PyExc_IndexError, "stats: start and end must be within the text");
        return NULL;
    }
    /* An ASCII str's own bytes, no copy; other text as the UTF-8 of its part. */
    int ascii = PyUnicode_IS_ASCII(args[0]);
    PyObject *part = ascii ? Py_NewRef(args[0]) : PyUnicode_Substring(args[0], start, end);
    if (part == NULL) return NULL;
    Py_ssize_t n;
    text s = (text)PyUnicode_AsUTF8AndSize(part, &n);
    if (s == NULL) {
        Py_DECREF(part);
        return NULL;
    }
    if (ascii) {
        s += start;
        n = end - start;
    }
    room own = {NULL, NULL, 0, NULL, 0}, *r = kept_in_use ? &own : &kept;
    kept_in_use = 1;
    PyObject *skeleton = NULL, *layout = NULL, *map = NULL, *result = NULL;
    Py_ssize_t skeleton_len = 0, nones = 0, count = cut(s, n, r, &skeleton_len, &nones);
    if (count < 0) goto done;
    if (ascii) {
        if ((skeleton = PyUnicode_New(skeleton_len, 127)) != NULL) memcpy(PyUnicode_DATA(skeleton), r->skeleton, (size_t)skeleton_len);
    } else { /* the pieces are cut at ASCII characters: each is as valid UTF-8 as the text */
        skeleton = PyUnicode_DecodeUTF8(r->skeleton, skeleton_len, NULL);
    }
    if (skeleton == NULL || (layout = PyObject_CallOneArg(args[4], skeleton)) == NULL) goto done;
    if ((map = placed(r, count, nones, layout, args[3])) != NULL)
        result = Py_BuildValue("(OOO)", layout, PyTuple_GET_ITEM(map, 0), PyTuple_GET_ITEM(map, 1));
done:
    Py_XDECREF(map);
    Py_XDECREF(layout);
    Py_XDECREF(skeleton);
    Py_DECREF(part);
    if (r == &kept) {
        kept_in_use = 0;
    } else {
        PyMem_Free(own.values);
        PyMem_Free(own.is_none);
        PyMem_Free(own.skeleton);
    }
    return result;
}

/* --- find ------------------------------------------------------------------------------- */

static const char find_doc[] =
    "find(text, sub, start, /)\n--\n\n"
    "text.find(sub, start). CPython's find takes about 0.45 ns a character over long text on\n"
    "this machine, glibc's memmem 0.11: the parser looks for each block's end with it.";

static PyObject *find(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "find(text: str, sub: str, start: int)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    PyObject *text_obj = args[0], *sub = args[1];
    if (PyUnicode_KIND(text_obj) != PyUnicode_1BYTE_KIND || PyUnicode_KIND(sub) != PyUnicode_1BYTE_KIND) {
        Py_ssize_t at = PyUnicode_Find(text_obj, sub, start, PY_SSIZE_T_MAX, 1);
        return at == -2 ? NULL : PyLong_FromSsize_t(at);
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text_obj), m = PyUnicode_GET_LENGTH(sub);
    if (start < 0 && (start += n) < 0) start = 0;
    if (n - start < m) return PyLong_FromSsize_t(-1);
    const char *data = PyUnicode_DATA(text_obj);
    const char *at = memmem(data + start, (size_t)(n - start), PyUnicode_DATA(sub), (size_t)m);
    return PyLong_FromSsize_t(at == NULL ? -1 : at - data);
}

/* --- lines ------------------------------------------------------------------------------ */

static const char lines_doc[] =
    "lines(text, /)\n--\n\n"
    "text.count('\\n'), 16 characters at a time: CPython's count reads one at a time, and the\n"
    "runner counts the lines of all its simulator's output (a tenth of its work).";

static PyObject *lines(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "lines(text: str)");
        return NULL;
    }
    PyObject *text_obj = args[0];
    if (PyUnicode_KIND(text_obj) != PyUnicode_1BYTE_KIND) {
        PyObject *newline = PyUnicode_FromOrdinal('\n');
        if (newline == NULL) return NULL;
        Py_ssize_t count = PyUnicode_Count(text_obj, newline, 0, PY_SSIZE_T_MAX);
        Py_DECREF(newline);
        return count < 0 ? NULL : PyLong_FromSsize_t(count);
    }
    const unsigned char *s = PyUnicode_DATA(text_obj);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text_obj), i = 0, count = 0;
#ifdef __SSE2__
    for (; i + 16 <= n; i += 16)
        count += __builtin_popcount((unsigned)_mm_movemask_epi8(is(_mm_loadu_si128((const __m128i *)(s + i)), '\n')));
#endif
    for (; i < n; i++) count += s[i] == '\n';
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"lines", (PyCFunction)(void (*)(void))lines, METH_FASTCALL, lines_doc},
    {"stats", (PyCFunction)(void (*)(void))stats, METH_FASTCALL, stats_doc},
    {"find", (PyCFunction)(void (*)(void))find, METH_FASTCALL, find_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "cascade_sim._tokenizer", .m_doc = "The stats block tokenizer (see _tokenizer.c).",
    .m_size = 0, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__tokenizer(void) {
    init_classes();
    if (none_str == NULL && (none_str = PyUnicode_InternFromString("none")) == NULL) return NULL;
    if (names_str == NULL && (names_str = PyUnicode_InternFromString("names")) == NULL) return NULL;
    if (slots_str == NULL && (slots_str = PyUnicode_InternFromString("slots")) == NULL) return NULL;
    const char *spelled[2][2] = {{"-nan", "nan"}, {"-inf", "inf"}};
    for (int sign = 0; sign < 2; sign++) {
        nans[sign] = PyOS_string_to_double(spelled[0][sign], NULL, NULL);
        infs[sign] = PyOS_string_to_double(spelled[1][sign], NULL, NULL);
    }
    return PyModule_Create(&module);
}
