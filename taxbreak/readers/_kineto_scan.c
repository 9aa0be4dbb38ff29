/* One pass over a chunk of Kineto events ("[" event, ... "]") writing the
 * fields the reader uses as fixed-width rows (taxbreak/readers/kineto_scan.py).
 *
 * The scanner is a strict JSON validator for a fast subset: it returns None
 * for anything it cannot read exactly as msgspec and the Python rules would
 * (invalid JSON, escapes in keys or names, numbers it would have to round,
 * duplicate keys, deep nesting, wrong types), and the chunk then goes through
 * the Python decoder unchanged. Values it reads but the Python rules treat
 * specially (a string pid, a float id, an exponent in ts) are only marked
 * (F_ODD, TS_ODD, DUR_ODD); the reader decides per chunk whether they matter.
 *
 * Safety: every byte access is checked against the buffer length; nesting is
 * skipped with a bounded explicit stack (no recursion); all arithmetic on
 * numbers is overflow-checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Row layout: int64 columns, kept in step with kineto_scan.py (COLUMNS). Rows are
 * built one event at a time and handed back column by column. */
enum {
    C_START, C_END, C_PH, C_CAT, C_NAME, C_PID, C_TID, C_ID, C_TS, C_DUR,
    C_EXTERNAL_ID, C_CORRELATION, C_CBID, C_PYTHON_ID, C_PYTHON_PARENT_ID, C_SEQUENCE_NR,
    C_DEVICE, C_CONTEXT, C_STREAM, C_REGISTERS, C_SHARED_MEMORY, C_BYTES, C_GRAPH_ID, C_GRAPH_NODE_ID,
    C_GRID_X, C_GRID_Y, C_GRID_Z, C_BLOCK_X, C_BLOCK_Y, C_BLOCK_Z,
    C_RAW0, C_RAW1, C_RAW2, C_RAW3,   /* codes of the raw JSON text of the args shapes, -1 absent */
    C_FLAGS, N_COLS
};

/* C_FLAGS bits */
#define TS_MISSING 1
#define TS_ODD 2
#define DUR_MISSING 4
#define DUR_ODD 8
#define F_ODD 16        /* an id or arg the Python rules read differently (string, float, bool...) */
#define F_HAS_DEVICE 32
#define F_HAS_STREAM 64

#define MAX_DEPTH_CAP 128
#define FLAG (-1)

typedef struct {
    const uint8_t *b;
    Py_ssize_t n, i;
    int max_depth;
    Py_ssize_t number_chars;
} Scan;

/* ---- interned strings: (offset, length) into the chunk -> code ---- */
typedef struct {
    Py_ssize_t *off, *len;     /* per code */
    int32_t *slots;            /* open addressing: code + 1, 0 = empty */
    Py_ssize_t n, cap, nslots;
} Intern;

static uint64_t hash_bytes(const uint8_t *s, Py_ssize_t len) {
    /* the length and at most 24 bytes from each end: long kernel names differ there,
     * and equal hashes are told apart by memcmp */
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)len;
    Py_ssize_t head = len < 48 ? len : 24;
    for (Py_ssize_t k = 0; k < head; k++) { h ^= s[k]; h *= 1099511628211ULL; }
    for (Py_ssize_t k = head > len - 24 ? head : len - 24; k < len; k++) { h ^= s[k]; h *= 1099511628211ULL; }
    return h;
}

static int intern_grow(Intern *t, const uint8_t *b) {
    Py_ssize_t nslots = t->nslots ? t->nslots * 2 : 256;
    int32_t *slots = calloc((size_t)nslots, sizeof(int32_t));
    if (!slots) return -1;
    for (Py_ssize_t c = 0; c < t->n; c++) {
        uint64_t h = hash_bytes(b + t->off[c], t->len[c]);
        Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(nslots - 1));
        while (slots[s]) s = (s + 1) & (nslots - 1);
        slots[s] = (int32_t)(c + 1);
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* Code of the string b[off:off+len]; -2 on allocation failure. */
static int64_t intern(Intern *t, const uint8_t *b, Py_ssize_t off, Py_ssize_t len) {
    if (t->n >= INT32_MAX / 4) return -2;  /* codes are int32 in the slots: past that, the Python path */
    if ((t->n + 1) * 2 > t->nslots && intern_grow(t, b) < 0) return -2;
    uint64_t h = hash_bytes(b + off, len);
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(t->nslots - 1));
    while (t->slots[s]) {
        Py_ssize_t c = t->slots[s] - 1;
        if (t->len[c] == len && memcmp(b + t->off[c], b + off, (size_t)len) == 0) return c;
        s = (s + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        Py_ssize_t *o = realloc(t->off, (size_t)cap * sizeof(Py_ssize_t));
        if (!o) return -2;
        t->off = o;
        Py_ssize_t *l = realloc(t->len, (size_t)cap * sizeof(Py_ssize_t));
        if (!l) return -2;
        t->len = l;
        t->cap = cap;
    }
    t->off[t->n] = off;
    t->len[t->n] = len;
    t->slots[s] = (int32_t)(t->n + 1);
    return t->n++;
}

static void intern_free(Intern *t) {
    free(t->off);
    free(t->len);
    free(t->slots);
}

/* ---- lexical pieces ---- */
static inline void skip_ws(Scan *p) {
    while (p->i < p->n) {
        uint8_t c = p->b[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        p->i++;
    }
}

static inline int peek(Scan *p) { return p->i < p->n ? p->b[p->i] : -1; }

static inline int expect(Scan *p, uint8_t c) {
    skip_ws(p);
    if (peek(p) != c) return FLAG;
    p->i++;
    return 0;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence starting at b[i] (a lead byte of 0x80 or more), or FLAG. */
static int utf8_seq(const Scan *p, Py_ssize_t i) {
    const uint8_t *b = p->b;
    uint8_t c = b[i];
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) { need = 2; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) need = 2;
    else if (c == 0xED) { need = 2; hi = 0x9F; }   /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) need = 2;
    else if (c == 0xF0) { need = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) { need = 3; hi = 0x8F; }
    else return FLAG;
    if (i + need >= p->n) return FLAG;
    if (b[i + 1] < lo || b[i + 1] > hi) return FLAG;
    for (int k = 2; k <= need; k++)
        if (b[i + k] < 0x80 || b[i + k] > 0xBF) return FLAG;
    return need + 1;
}

/* Bytes that end nothing inside a string: printable ASCII but '"' and '\\'. */
static uint8_t PLAIN[256];

static void init_plain(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
}

/* A JSON string at p->i; its content span in off and len; escaped is set when it holds a backslash. */
static int scan_string(Scan *p, Py_ssize_t *off, Py_ssize_t *len, int *escaped) {
    if (peek(p) != '"') return FLAG;
    Py_ssize_t i = p->i + 1;
    int esc = 0;
    while (i < p->n) {
        while (i < p->n && PLAIN[p->b[i]]) i++;  /* the common bytes in one tight loop */
        if (i >= p->n) break;
        uint8_t c = p->b[i];
        if (c == '"') {
            *off = p->i + 1;
            *len = i - (p->i + 1);
            *escaped = esc;
            p->i = i + 1;
            return 0;
        }
        if (c < 0x20) return FLAG;
        if (c == '\\') {
            esc = 1;
            if (i + 1 >= p->n) return FLAG;
            uint8_t e = p->b[i + 1];
            if (e == 'u') {
                if (i + 5 >= p->n) return FLAG;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int h = hexval(p->b[i + k]);
                    if (h < 0) return FLAG;
                    v = v * 16 + h;
                }
                if (v >= 0xD800 && v <= 0xDFFF) return FLAG;  /* surrogates: left to the Python rules */
                i += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                i += 2;
            } else {
                return FLAG;
            }
            continue;
        }
        if (c >= 0x80) {
            int k = utf8_seq(p, i);
            if (k < 0) return FLAG;
            i += k;
            continue;
        }
        i++;
    }
    return FLAG;
}

typedef struct {
    Py_ssize_t start, len;        /* the whole text */
    Py_ssize_t int_start, int_len;
    Py_ssize_t frac_start, frac_len;
    int neg, has_exp;
} Num;

static int scan_number(Scan *p, Num *num) {
    const uint8_t *b = p->b;
    Py_ssize_t i = p->i, n = p->n;
    memset(num, 0, sizeof(*num));
    num->start = i;
    if (i < n && b[i] == '-') { num->neg = 1; i++; }
    if (i >= n) return FLAG;
    num->int_start = i;
    if (b[i] == '0') {
        i++;
    } else if (b[i] >= '1' && b[i] <= '9') {
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
    } else {
        return FLAG;
    }
    num->int_len = i - num->int_start;
    if (i < n && b[i] == '.') {
        i++;
        num->frac_start = i;
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
        num->frac_len = i - num->frac_start;
        if (num->frac_len == 0) return FLAG;
    }
    if (i < n && (b[i] == 'e' || b[i] == 'E')) {
        num->has_exp = 1;
        i++;
        if (i < n && (b[i] == '+' || b[i] == '-')) i++;
        Py_ssize_t d = i;
        while (i < n && b[i] >= '0' && b[i] <= '9') i++;
        if (i == d) return FLAG;
    }
    num->len = i - num->start;
    p->i = i;
    return 0;
}

/* An integer number (no fraction, no exponent) that int64 holds; 0 when it is one. */
static int num_to_int64(const Scan *p, const Num *num, int64_t *out) {
    if (num->frac_len || num->has_exp || num->int_len > 19) return FLAG;
    uint64_t acc = 0;
    for (Py_ssize_t k = 0; k < num->int_len; k++) acc = acc * 10 + (uint64_t)(p->b[num->int_start + k] - '0');
    if (num->neg) {
        if (acc > (uint64_t)INT64_MAX + 1) return FLAG;
        *out = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
    } else {
        if (acc > (uint64_t)INT64_MAX) return FLAG;
        *out = (int64_t)acc;
    }
    return 0;
}

/* Decimal microseconds to exact ns, sub-ns digits truncated toward zero
 * (kineto_text.us_text_to_ns); FLAG where the Python rules must decide. */
static int num_to_ns(const Scan *p, const Num *num, int64_t *out) {
    if (num->has_exp || num->len > p->number_chars || num->int_len > 16) return FLAG;
    uint64_t acc = 0;
    for (Py_ssize_t k = 0; k < num->int_len; k++) acc = acc * 10 + (uint64_t)(p->b[num->int_start + k] - '0');
    for (Py_ssize_t k = 0; k < 3; k++) {  /* < 1e16 * 1000 + 999: no uint64 overflow */
        uint64_t d = k < num->frac_len ? (uint64_t)(p->b[num->frac_start + k] - '0') : 0;
        acc = acc * 10 + d;
    }
    if (num->neg) {
        if (acc > (uint64_t)INT64_MAX) return FLAG;
        *out = -(int64_t)acc;
    } else {
        if (acc > (uint64_t)INT64_MAX) return FLAG;
        *out = (int64_t)acc;
    }
    return 0;
}

static int scan_literal(Scan *p) {
    static const char *words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t len = strlen(words[w]);
        if (p->i + (Py_ssize_t)len <= p->n && memcmp(p->b + p->i, words[w], len) == 0) {
            p->i += (Py_ssize_t)len;
            return 0;
        }
    }
    return FLAG;
}

static int is_null(Scan *p) {
    if (p->i + 4 <= p->n && memcmp(p->b + p->i, "null", 4) == 0) {
        p->i += 4;
        return 1;
    }
    return 0;
}

/* One JSON value of any shape, validated and skipped without recursion.
 * ``strict``: the value is decoded by msgspec as ``Any`` (a Python object):
 * numbers it might refuse or round (exponents, long texts) are left to the Python rules. */
static int skip_value(Scan *p, int depth, int strict) {
    uint8_t stack[MAX_DEPTH_CAP];
    int d = 0;
    Py_ssize_t off, len;
    int esc;
    for (;;) {
        skip_ws(p);
        int c = peek(p);
        if (c == '{' || c == '[') {
            if (depth + d + 1 > p->max_depth || d >= MAX_DEPTH_CAP) return FLAG;
            p->i++;
            skip_ws(p);
            if (peek(p) == (c == '{' ? '}' : ']')) {
                p->i++;
            } else {
                stack[d++] = (uint8_t)c;
                if (c == '{') {
                    if (scan_string(p, &off, &len, &esc) < 0 || expect(p, ':') < 0) return FLAG;
                }
                continue;
            }
        } else if (c == '"') {
            if (scan_string(p, &off, &len, &esc) < 0) return FLAG;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            Num num;
            if (scan_number(p, &num) < 0) return FLAG;
            if (strict && (num.has_exp || num.len > 24)) return FLAG;
        } else if (c == 't' || c == 'f' || c == 'n') {
            if (scan_literal(p) < 0) return FLAG;
        } else {
            return FLAG;
        }
        /* after a complete value: close containers or move to the next member */
        for (;;) {
            if (d == 0) return 0;
            skip_ws(p);
            c = peek(p);
            uint8_t top = stack[d - 1];
            if (c == ',') {
                p->i++;
                if (top == '{') {
                    skip_ws(p);
                    if (scan_string(p, &off, &len, &esc) < 0 || expect(p, ':') < 0) return FLAG;
                }
                break;
            }
            if (c == (top == '{' ? '}' : ']')) {
                p->i++;
                d--;
                continue;
            }
            return FLAG;
        }
    }
}

/* ---- fields ---- */

/* A value read as an id (msgspec ``Any`` -> int_ids): int64 integer -> value,
 * null -> -1, anything else valid -> -1 with F_ODD. Returns 1 when present and an integer. */
static int scan_id(Scan *p, int depth, int64_t *out, int64_t *flags) {
    *out = -1;
    skip_ws(p);
    int c = peek(p);
    if (c == 'n' && is_null(p)) return 0;
    if (c == '-' || (c >= '0' && c <= '9')) {
        Num num;
        if (scan_number(p, &num) < 0) return FLAG;
        if (num.has_exp || num.len > 24) return FLAG;
        if (num_to_int64(p, &num, out) == 0) return 1;
        *out = -1;
        *flags |= F_ODD;
        return 0;
    }
    if (skip_value(p, depth, 1) < 0) return FLAG;
    *flags |= F_ODD;
    return 0;
}

/* ``ts``/``dur`` (msgspec.Raw, converted by kineto_text): exact ns or a state bit. */
static int scan_time(Scan *p, int depth, int64_t *out, int64_t *flags, int64_t missing, int64_t odd) {
    *out = 0;
    skip_ws(p);
    int c = peek(p);
    if (c == 'n' && is_null(p)) { *flags |= missing; return 0; }
    if (c == '-' || (c >= '0' && c <= '9')) {
        Num num;
        if (scan_number(p, &num) < 0) return FLAG;
        if (num_to_ns(p, &num, out) < 0) { *out = 0; *flags |= odd; }
        return 0;
    }
    if (skip_value(p, depth, 0) < 0) return FLAG;
    *flags |= odd;
    return 0;
}

/* grid / block: [x, y, z] of int64 integers, or null; else F_ODD. */
static int scan_triple(Scan *p, int depth, int64_t *xyz, int64_t *flags) {
    xyz[0] = xyz[1] = xyz[2] = -1;
    skip_ws(p);
    Py_ssize_t start = p->i;
    if (peek(p) == 'n' && is_null(p)) return 0;
    if (peek(p) == '[') {
        p->i++;
        int k = 0;
        for (; k < 3; k++) {
            skip_ws(p);
            int c = peek(p);
            Num num;
            if (!(c == '-' || (c >= '0' && c <= '9')) || scan_number(p, &num) < 0
                || num_to_int64(p, &num, &xyz[k]) < 0)
                break;
            if (expect(p, k < 2 ? ',' : ']') < 0) break;
        }
        if (k == 3) return 0;
    }
    xyz[0] = xyz[1] = xyz[2] = -1;
    p->i = start;
    if (skip_value(p, depth, 1) < 0) return FLAG;
    *flags |= F_ODD;
    return 0;
}

typedef struct {
    const char *word;
    Py_ssize_t len;
} Key;

#define KEY(w) {w, sizeof(w) - 1}

/* Index of the key b[off:off+len] in ``keys``, -1 when absent: the length and first byte
 * rule out almost every entry before any memcmp. */
static inline int find_key(const Scan *p, Py_ssize_t off, Py_ssize_t len, const Key *keys, int n) {
    for (int k = 0; k < n; k++)
        if (keys[k].len == len && keys[k].word[0] == (char)p->b[off]
            && memcmp(keys[k].word, p->b + off, (size_t)len) == 0)
            return k;
    return -1;
}

/* args keys: the 14 ids in column order, grid, block, the 4 raw shapes, name, labels */
static const Key ARGS_KEYS[] = {
    KEY("External id"), KEY("correlation"), KEY("cbid"), KEY("Python id"), KEY("Python parent id"),
    KEY("Sequence number"), KEY("device"), KEY("context"), KEY("stream"), KEY("registers per thread"),
    KEY("shared memory"), KEY("bytes"), KEY("graph id"), KEY("graph node id"),
    KEY("grid"), KEY("block"),
    KEY("Input Dims"), KEY("Input type"), KEY("Input Strides"), KEY("Concrete Inputs"),
    KEY("name"), KEY("labels"),
};
#define N_ID_ARGS 14
#define A_GRID 14
#define A_RAW0 16
#define A_NAME 20
#define N_ARGS_KEYS 22

static int scan_arg(Scan *p, int depth, int k, Intern *strings, int64_t *row) {
    if (k < 0)
        return skip_value(p, depth, 0);
    if (k < N_ID_ARGS) {
        int got = scan_id(p, depth, &row[C_EXTERNAL_ID + k], &row[C_FLAGS]);
        if (got < 0) return FLAG;
        if (got == 1 && k == C_DEVICE - C_EXTERNAL_ID) row[C_FLAGS] |= F_HAS_DEVICE;
        if (got == 1 && k == C_STREAM - C_EXTERNAL_ID) row[C_FLAGS] |= F_HAS_STREAM;
        return 0;
    }
    if (k < A_RAW0)
        return scan_triple(p, depth, &row[k == A_GRID ? C_GRID_X : C_BLOCK_X], &row[C_FLAGS]);
    if (k < A_NAME) {
        skip_ws(p);
        Py_ssize_t start = p->i;
        if (skip_value(p, depth, 0) < 0) return FLAG;
        row[C_RAW0 + k - A_RAW0] = intern(strings, p->b, start, p->i - start);
        return row[C_RAW0 + k - A_RAW0] < 0 ? FLAG : 0;
    }
    /* "name" / "labels" are read by msgspec as Any (metadata events): strict numbers */
    return skip_value(p, depth, 1);
}

static int scan_args(Scan *p, int depth, Intern *strings, int64_t *row) {
    uint32_t seen = 0;
    Py_ssize_t off, len;
    int esc;
    skip_ws(p);
    if (peek(p) == 'n' && is_null(p)) return 0;
    if (peek(p) != '{') return FLAG;  /* msgspec: wrong type for Args */
    if (depth + 1 > p->max_depth) return FLAG;
    p->i++;
    skip_ws(p);
    if (peek(p) == '}') { p->i++; return 0; }
    for (;;) {
        skip_ws(p);
        if (scan_string(p, &off, &len, &esc) < 0 || esc || expect(p, ':') < 0) return FLAG;
        int k = len > 0 ? find_key(p, off, len, ARGS_KEYS, N_ARGS_KEYS) : -1;
        if (k >= 0) {
            if (seen & (1u << k)) return FLAG;  /* a repeated key: msgspec's choice, not ours */
            seen |= 1u << k;
        }
        if (scan_arg(p, depth + 1, k, strings, row) < 0) return FLAG;
        skip_ws(p);
        int c = peek(p);
        if (c == ',') { p->i++; continue; }
        if (c == '}') { p->i++; return 0; }
        return FLAG;
    }
}

/* ph / cat / name: a string without escapes (interned) or null (-1). */
static int scan_text(Scan *p, Intern *strings, int64_t *code) {
    Py_ssize_t off, len;
    int esc;
    skip_ws(p);
    *code = -1;
    if (peek(p) == 'n' && is_null(p)) return 0;
    if (scan_string(p, &off, &len, &esc) < 0 || esc) return FLAG;
    *code = intern(strings, p->b, off, len);
    return *code < 0 ? FLAG : 0;
}

enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_ID, K_TS, K_DUR, K_ARGS, N_KEYS };
static const Key EVENT_KEYS[] = {
    KEY("ph"), KEY("cat"), KEY("name"), KEY("pid"), KEY("tid"), KEY("id"), KEY("ts"), KEY("dur"), KEY("args"),
};

static int scan_member(Scan *p, int key, Intern *strings, int64_t *row) {
    switch (key) {
    case K_PH: return scan_text(p, strings, &row[C_PH]);
    case K_CAT: return scan_text(p, strings, &row[C_CAT]);
    case K_NAME: return scan_text(p, strings, &row[C_NAME]);
    case K_PID: return scan_id(p, 2, &row[C_PID], &row[C_FLAGS]) < 0 ? FLAG : 0;
    case K_TID: return scan_id(p, 2, &row[C_TID], &row[C_FLAGS]) < 0 ? FLAG : 0;
    case K_ID: return scan_id(p, 2, &row[C_ID], &row[C_FLAGS]) < 0 ? FLAG : 0;
    case K_TS: return scan_time(p, 2, &row[C_TS], &row[C_FLAGS], TS_MISSING, TS_ODD);
    case K_DUR: return scan_time(p, 2, &row[C_DUR], &row[C_FLAGS], DUR_MISSING, DUR_ODD);
    default: return scan_args(p, 2, strings, row);
    }
}

static void init_row(int64_t *row) {
    for (int k = 0; k < N_COLS; k++) row[k] = -1;
    row[C_TS] = row[C_DUR] = 0;
    row[C_FLAGS] = TS_MISSING | DUR_MISSING;  /* cleared when the key is seen */
}

static int scan_event(Scan *p, Intern *strings, int64_t *row) {
    Py_ssize_t off, len;
    int esc;
    uint32_t seen = 0;
    init_row(row);
    skip_ws(p);
    row[C_START] = p->i;
    if (peek(p) != '{') return FLAG;  /* not an object: msgspec's wrong type, left to Python */
    p->i++;
    skip_ws(p);
    if (peek(p) == '}') {
        p->i++;
    } else {
        for (;;) {
            skip_ws(p);
            if (scan_string(p, &off, &len, &esc) < 0 || esc || expect(p, ':') < 0) return FLAG;
            int key = len > 0 ? find_key(p, off, len, EVENT_KEYS, N_KEYS) : -1;
            if (key < 0) {
                if (skip_value(p, 2, 0) < 0) return FLAG;
            } else {
                if (seen & (1u << key)) return FLAG;
                seen |= 1u << key;
                if (key == K_TS) row[C_FLAGS] &= ~TS_MISSING;
                if (key == K_DUR) row[C_FLAGS] &= ~DUR_MISSING;
                if (scan_member(p, key, strings, row) < 0) return FLAG;
            }
            skip_ws(p);
            int c = peek(p);
            if (c == ',') { p->i++; continue; }
            if (c == '}') { p->i++; break; }
            return FLAG;
        }
    }
    row[C_END] = p->i;
    return 0;
}

/* ---- rows buffer ---- */
typedef struct {
    int64_t *rows;
    Py_ssize_t n, cap;
} Rows;

static int64_t *next_row(Rows *r) {
    if (r->n == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 1024;
        int64_t *rows = realloc(r->rows, (size_t)cap * N_COLS * sizeof(int64_t));
        if (!rows) return NULL;
        r->rows = rows;
        r->cap = cap;
    }
    return r->rows + (r->n++) * N_COLS;
}

/* The whole chunk: "[" (event ("," event)*)? "]" and nothing after but spaces. */
static int scan_array(Scan *p, Intern *strings, Rows *rows) {
    if (expect(p, '[') < 0) return FLAG;
    skip_ws(p);
    if (peek(p) == ']') {
        p->i++;
    } else {
        for (;;) {
            int64_t *row = next_row(rows);
            if (!row) return -2;
            if (scan_event(p, strings, row) < 0) return FLAG;
            skip_ws(p);
            int c = peek(p);
            if (c == ',') { p->i++; continue; }
            if (c == ']') { p->i++; break; }
            return FLAG;
        }
    }
    skip_ws(p);
    return p->i == p->n ? 0 : FLAG;
}

static PyObject *build_result(Scan *p, Intern *strings, Rows *rows) {
    PyObject *texts = PyList_New(strings->n);
    if (!texts) return NULL;
    for (Py_ssize_t c = 0; c < strings->n; c++) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)p->b + strings->off[c], strings->len[c], "strict");
        if (!s) {  /* cannot happen after the UTF-8 check; left to the Python rules if it does */
            PyErr_Clear();
            Py_DECREF(texts);
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(texts, c, s);
    }
    PyObject *table = PyBytes_FromStringAndSize(NULL, rows->n * N_COLS * (Py_ssize_t)sizeof(int64_t));
    if (!table) {
        Py_DECREF(texts);
        return NULL;
    }
    int64_t *cols = (int64_t *)PyBytes_AS_STRING(table);  /* column-major: column k at k * n */
    for (Py_ssize_t r = 0; r < rows->n; r++)
        for (int k = 0; k < N_COLS; k++) cols[k * rows->n + r] = rows->rows[r * N_COLS + k];
    PyObject *out = Py_BuildValue("(nNN)", rows->n, table, texts);
    return out;
}

static PyObject *scan_chunk(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t number_chars, max_depth;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &number_chars, &max_depth)) return NULL;
    Scan p = {view.buf, view.len, 0, (int)(max_depth < MAX_DEPTH_CAP ? max_depth : MAX_DEPTH_CAP), number_chars};
    Intern strings = {0};
    Rows rows = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_array(&p, &strings, &rows);
    Py_END_ALLOW_THREADS
    PyObject *out;
    if (rc == -2) {
        out = PyErr_NoMemory();
    } else if (rc < 0) {
        out = Py_NewRef(Py_None);
    } else {
        out = build_result(&p, &strings, &rows);
    }
    intern_free(&strings);
    free(rows.rows);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"scan_chunk", scan_chunk, METH_VARARGS,
     "scan_chunk(chunk, number_chars, max_depth) -> (n, rows, strings) or None when the chunk is outside the fast subset"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kineto_scan(void) {
    init_plain();
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "N_COLS", N_COLS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
