/* The native read loop: one pthread per process waits on every connection with one epoll, and does
 * the per-read and per-event work in C -- the read with its kernel receive stamp (SO_TIMESTAMPNS, on
 * the perf_counter clock), HTTP/1.1 response framing (status line, headers, Content-Length, chunked,
 * close-delimited), SSE line splitting by the WHATWG rules, deadlines -- and never takes the GIL.
 * Python calls in once per request and wakes only when a request has news it must judge (its first
 * events, an event that may end it, its end, its deadline), through one eventfd per connection that
 * the caller's gevent hub watches. Hand-written because no library we can install gives an HTTP and
 * SSE read loop that keeps each read's kernel stamp and runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 65536
#define HEAD_MAX 65536 /* response headers beyond this: not an HTTP response we read */
#define HEAD_KEEP 512  /* a body's first bytes kept to show what it was */
#define NEEDLES 4
#define DRAIN_S 1.0
#define WAKE_SLACK_S 0.0001 /* allowed for the kernel's path from a wake-up to epoll_wait's return (microseconds) */
#define TAKE_EVENTS 4096      /* events held for Python at most before it is woken to take them, and */
#define TAKE_BYTES (1 << 20) /* their bytes: a long stream's are taken in batches; with this many held, */
                             /* the connection is not read until Python has taken them (its high-water mark) */
#define SSE_MAX (8 << 20)    /* an SSE line or an event's data past this: malformed (sse_codec.MAX_FIELD) */
#define BODY_MAX ((size_t)64 << 20) /* a whole 200 body past this: malformed, read no further (response.MAX_BODY) */

enum { C_CLOSED, C_CONNECTING, C_SENDING, C_OPEN };
enum { H_HEAD, H_LENGTH, H_CHUNK_SIZE, H_CHUNK_DATA, H_CHUNK_CRLF, H_TRAILER, H_CLOSE, H_DONE };
/* what ended an exchange, as far as the wire goes (Python judges the rest) */
enum { E_NONE, E_COMPLETE, E_CLOSED, E_ERROR, E_CONNECT_TIMEOUT, E_HTTP, E_UPGRADE, E_SSE, E_BODY };

typedef struct {
    double stamp, late; /* late: how much earlier than its stamp the read's first bytes can have come */
    uint32_t read_no, off, len;
    int trailed; /* its read went on past it (a comment, a field, part of a line): its stamp is of later bytes */
} event_t;

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static int buf_add(buf_t *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) return -1;
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

typedef struct {
    int fd, efd, state, opened, notified, watching, paused;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    /* the exchange on this connection (seq 0: none) */
    uint64_t seq;
    int active, finished, keep, stream, reused, retried, began, content_armed;
    buf_t request;
    size_t sent;
    double connect_s, connect_by, deadline_abs, stall_s, last_event, send_at, expired_at, drain_by, end_at;
    double clear_at; /* the last read that left the socket empty began then: what came later, came after */
    double heard_at, quiet; /* the last read's stamp (the last send's before one), the longest time to the next */
    int backlog;     /* the socket may have held bytes since clear_at (a full read, reading paused) */
    int expired;
    char needles[NEEDLES][32];
    int needle_len[NEEDLES], nneedles;
    /* HTTP framing */
    int hstate, status, sse, headers_new;
    buf_t head, headers; /* headers: name\0value\0 pairs */
    long long remaining;
    int chunked, has_length;
    /* SSE decoding */
    int bom, bomn, cr, ndata, named, comments, dispatched;
    size_t fed, event_end; /* SSE bytes fed so far, and where the last event dispatched ended */
    buf_t line, data;
    /* for Python */
    buf_t blob, body, first;
    event_t *events;
    size_t nevents, events_cap;
    uint32_t reads;
    int end, err;
    char msg[160];
    int notify_events; /* events since the last take that Python must see now */
} conn_t;

typedef struct {
    PyObject_HEAD pthread_mutex_t lock;
    int ep, wake;
    pid_t pid;
    conn_t **conns;
    Py_ssize_t nconns, cap;
    double next_due;
    pthread_t thread;
    double ready_after; /* what this loop pass's epoll_wait reported became readable no earlier */
} Plane;

static double mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* -- when what epoll_wait reports became readable ------------------------------------------------
 * A read's kernel stamp is its last bytes' arrival; when it brings several events, the earlier ones
 * came sooner, but no sooner than the read's socket last stood empty (`clear_at`) or than the epoll
 * pass that found it readable could have seen it become so. A pass that slept saw it arrive: it was
 * woken by the first arrival, so nothing it reports came before its return less the time it then
 * waited for a CPU (run_delay, /proc/thread-self/schedstat) and WAKE_SLACK_S; a pass that did not
 * sleep reports only what the pass before it had not, and that one looked no earlier than the same
 * figure of its own. This is the generator's lateness, bounded per read: the validity's error bar. */
static __thread int sched_fd = -2;

static double run_delay(void) { /* seconds this thread has waited on a run queue; NAN if unknown */
    if (sched_fd == -2) sched_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    char b[96];
    ssize_t k = sched_fd < 0 ? -1 : pread(sched_fd, b, sizeof b - 1, 0);
    unsigned long long ran, waited;
    if (k <= 0) return NAN;
    b[k] = 0;
    return sscanf(b, "%llu %llu", &ran, &waited) == 2 ? waited * 1e-9 : NAN;
}

static long voluntary_switches(void) {
    struct rusage u;
    return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nvcsw : -1;
}

typedef struct {
    double ready_after, looked; /* this pass's bound; the earliest the last whole pass can have looked */
} waited_t;

static int timed_wait(waited_t *w, int ep, struct epoll_event *evs, int max, int ms) {
    double in = mono(), d0 = run_delay();
    long v0 = voluntary_switches();
    int n = epoll_wait(ep, evs, max, ms);
    double out = mono();
    long v1 = voluntary_switches();
    double d1 = run_delay();
    double looked = isnan(d0) || isnan(d1) ? in : out - (d1 - d0) - WAKE_SLACK_S;
    w->ready_after = v1 > v0 && v0 >= 0 && !isnan(d1 - d0) ? looked : w->looked;
    if (n < max) w->looked = looked; /* a full pass may have left out what was ready */
    return n;
}

/* -- notifying Python -------------------------------------------------------------------------- */
static void notify(conn_t *c) {
    if (!c->notified) {
        c->notified = 1;
        uint64_t one = 1;
        (void)!write(c->efd, &one, sizeof one);
    }
}

static void end_with(conn_t *c, int end, int err, const char *msg, double at) {
    if (c->end == E_NONE) {
        c->end = end, c->err = err, c->end_at = at;
        if (msg != c->msg) snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : ""); /* c->msg: set already */
    }
    notify(c);
}

/* -- the socket -------------------------------------------------------------------------------- */
static void watch(Plane *pl, conn_t *c, int mask, Py_ssize_t id) {
    struct epoll_event ev = {.events = (uint32_t)mask, .data.u64 = (uint64_t)id};
    if (c->watching == mask) return;
    epoll_ctl(pl->ep, c->watching ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev);
    c->watching = mask;
}

static void close_socket(Plane *pl, conn_t *c) {
    if (c->fd >= 0) {
        epoll_ctl(pl->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    c->fd = -1, c->state = C_CLOSED, c->watching = 0, c->paused = 0, c->backlog = 0;
}

/* Python is behind on this connection's events: leave the rest in the kernel (TCP holds the sender
 * back) until it has taken them (`resume`). Out of the epoll set, not a zero mask: a hangup would
 * still be reported, again and again. */
static void pause_reading(Plane *pl, conn_t *c) {
    if (c->watching) epoll_ctl(pl->ep, EPOLL_CTL_DEL, c->fd, NULL);
    c->watching = 0, c->paused = 1, c->backlog = 1;
}

static void resume_reading(Plane *pl, conn_t *c, Py_ssize_t id) {
    if (c->paused) {
        c->paused = 0;
        if (c->fd >= 0 && c->state == C_OPEN) watch(pl, c, EPOLLIN | EPOLLRDHUP, id);
    }
}

static void reset_response(conn_t *c) {
    c->hstate = H_HEAD, c->status = 0, c->sse = 0, c->headers_new = 0;
    c->head.len = c->headers.len = 0;
    c->remaining = 0, c->chunked = c->has_length = 0;
    c->bom = 1, c->bomn = 0, c->cr = 0, c->ndata = 0, c->named = 0, c->comments = 0;
    c->dispatched = 0, c->fed = c->event_end = 0;
    c->line.len = c->data.len = 0;
    c->blob.len = c->body.len = c->first.len = 0;
    c->nevents = 0, c->reads = 0;
    c->began = 0;
}

/* A deadline `d` may come before the loop's next wake: wake it to wait less. */
static void rearm(Plane *pl, double d) {
    if (d < pl->next_due) {
        pl->next_due = d;
        uint64_t one = 1;
        (void)!write(pl->wake, &one, sizeof one);
    }
}

static void do_send(Plane *pl, conn_t *c, Py_ssize_t id);
static void begin(Plane *pl, conn_t *c, Py_ssize_t id);

/* The connection closed (`err` 0: by the peer) or failed under the exchange. A request sent on a
 * kept connection that brought no byte back goes once more on a new one (the server had closed it
 * meanwhile), as HTTP clients do; otherwise the exchange ends with it. */
static void lost(Plane *pl, conn_t *c, Py_ssize_t id, int err, double at) {
    close_socket(pl, c);
    if (c->active && !c->finished && c->reused && !c->began && !c->retried) {
        c->retried = 1;
        begin(pl, c, id);
        return;
    }
    end_with(c, err ? E_ERROR : E_CLOSED, err, NULL, at);
    if (c->finished) c->active = 0;
}

static void do_connect(Plane *pl, conn_t *c, Py_ssize_t id) {
    int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        end_with(c, E_ERROR, errno, NULL, mono());
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    c->fd = fd, c->opened++, c->watching = 0;
    c->connect_by = mono() + c->connect_s;
    rearm(pl, c->connect_by);
    if (connect(fd, (struct sockaddr *)&c->addr, c->addrlen) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close_socket(pl, c);
        end_with(c, E_ERROR, e, NULL, mono());
        return;
    }
    c->state = C_CONNECTING;
    watch(pl, c, EPOLLOUT, id);
}

static void do_send(Plane *pl, conn_t *c, Py_ssize_t id) {
    double began = 0; /* the last send's call: the server cannot have had the whole request before */
    while (c->sent < c->request.len) {
        began = mono();
        ssize_t n = send(c->fd, c->request.p + c->sent, c->request.len - c->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->state = C_SENDING;
                watch(pl, c, EPOLLOUT, id);
                return;
            }
            lost(pl, c, id, errno, mono());
            return;
        }
        c->sent += (size_t)n;
    }
    c->send_at = mono();
    c->heard_at = began > 0 ? began : c->send_at;
    c->state = C_OPEN;
    watch(pl, c, EPOLLIN | EPOLLRDHUP, id);
}

/* A request goes out: on the open connection, else on a new one. */
static void begin(Plane *pl, conn_t *c, Py_ssize_t id) {
    reset_response(c);
    c->sent = 0;
    if (c->state == C_OPEN) {
        c->reused = 1;
        do_send(pl, c, id);
    } else {
        c->reused = 0;
        do_connect(pl, c, id);
    }
}

/* -- SSE (WHATWG event-stream interpretation; llmchaos/sse_codec.py is the same in Python) -------- */
static int dispatch_event(conn_t *c, double stamp, double late) {
    if (c->nevents == c->events_cap) {
        size_t cap = c->events_cap ? c->events_cap * 2 : 64;
        event_t *e = realloc(c->events, cap * sizeof *e);
        if (e == NULL) return -1;
        c->events = e, c->events_cap = cap;
    }
    size_t len = c->data.len ? c->data.len - 1 : 0; /* each data line ended with \n; the last is dropped */
    event_t *ev = &c->events[c->nevents++];
    ev->stamp = stamp, ev->late = late, ev->read_no = c->reads, ev->off = (uint32_t)c->blob.len, ev->len = (uint32_t)len;
    ev->trailed = 0, c->dispatched = 1;
    if (buf_add(&c->blob, c->data.p ? c->data.p : "", len) < 0) return -1;
    c->data.len = 0;
    c->last_event = stamp;
    if (!c->content_armed || c->nevents >= TAKE_EVENTS || c->blob.len >= TAKE_BYTES) {
        c->notify_events = 1;
    } else {
        for (int i = 0; i < c->nneedles; i++)
            if (len >= (size_t)c->needle_len[i] && memmem(c->blob.p + ev->off, len, c->needles[i], c->needle_len[i]))
                c->notify_events = 1;
    }
    return 0;
}

static int sse_line(conn_t *c, const char *s, size_t n, double stamp, double late) {
    if (n == 0) { /* a blank line dispatches the event if it has data */
        int data = c->ndata;
        c->ndata = 0, c->named = 0;
        return data ? dispatch_event(c, stamp, late) : 0;
    }
    if (s[0] == ':') {
        c->comments++;
        return 0;
    }
    const char *colon = memchr(s, ':', n);
    size_t nlen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = colon ? n - nlen - 1 : 0;
    if (vlen && v[0] == ' ') v++, vlen--;
    if (nlen == 4 && memcmp(s, "data", 4) == 0) {
        c->ndata++;
        if (c->data.len + vlen + 1 > SSE_MAX) {
            snprintf(c->msg, sizeof c->msg, "an event's data over %d MiB", SSE_MAX >> 20);
            return -2;
        }
        if (buf_add(&c->data, v, vlen) < 0 || buf_add(&c->data, "\n", 1) < 0) return -1;
    } else if (nlen == 5 && memcmp(s, "event", 5) == 0) {
        c->named = 1; /* an event name alone is no event, but it is bytes of one pending */
    }
    return 0;
}

static int sse_feed(conn_t *c, const char *p, size_t n, double stamp, double late) {
    if (c->bom) { /* one UTF-8 BOM at the very start is skipped */
        static const char BOM[3] = {'\xef', '\xbb', '\xbf'};
        while (n && c->bomn < 3 && *p == BOM[c->bomn]) p++, n--, c->bomn++;
        if (c->bomn == 3) {
            c->bom = 0, c->bomn = 0;
        } else if (n) { /* no BOM: the bytes that began like one are the stream's */
            int k = c->bomn;
            c->bom = 0, c->bomn = 0;
            if (k && sse_feed(c, BOM, (size_t)k, stamp, late) < 0) return -1;
        } else {
            return 0;
        }
    }
    const char *start = p;
    size_t base = c->fed;
    c->fed += n;
    while (n) {
        if (c->cr) {
            c->cr = 0;
            if (*p == '\n') {
                if (c->event_end == base + (size_t)(p - start)) c->event_end++; /* the LF of its CRLF */
                p++, n--;
                continue;
            }
        }
        const char *nl = p;
        while (nl < p + n && *nl != '\n' && *nl != '\r') nl++;
        if (c->line.len + (size_t)(nl - p) > SSE_MAX) {
            snprintf(c->msg, sizeof c->msg, "an SSE line over %d MiB", SSE_MAX >> 20);
            return -2;
        }
        if (nl == p + n) {
            return buf_add(&c->line, p, n);
        }
        int rc;
        if (c->line.len) {
            if (buf_add(&c->line, p, (size_t)(nl - p)) < 0) return -1;
            rc = sse_line(c, c->line.p, c->line.len, stamp, late);
            c->line.len = 0;
        } else {
            rc = sse_line(c, p, (size_t)(nl - p), stamp, late);
        }
        if (rc < 0) return rc;
        if (c->dispatched) c->dispatched = 0, c->event_end = base + (size_t)(nl + 1 - start);
        c->cr = *nl == '\r';
        n -= (size_t)(nl - p) + 1;
        p = nl + 1;
    }
    return 0;
}

/* -- HTTP/1.1 response framing -------------------------------------------------------------------- */
static void body_bytes(conn_t *c, const char *p, size_t n, double stamp, double late) {
    if (!n) return;
    if (c->first.len < HEAD_KEEP) buf_add(&c->first, p, n < HEAD_KEEP - c->first.len ? n : HEAD_KEEP - c->first.len);
    if (c->finished || c->end != E_NONE) return; /* draining, or over: nothing more is read into it */
    if (c->sse) {
        int rc = sse_feed(c, p, n, stamp, late);
        if (rc == -2) end_with(c, E_SSE, 0, c->msg, stamp);
        else if (rc < 0) end_with(c, E_HTTP, 0, "out of memory", stamp);
    } else if (c->status == 200) { /* a whole answer, handed over when it ends */
        if (c->body.len + n > BODY_MAX) end_with(c, E_BODY, 0, NULL, stamp);
        else if (buf_add(&c->body, p, n) < 0) end_with(c, E_HTTP, 0, "out of memory", stamp);
    } else if (c->body.len < HEAD_KEEP) {
        buf_add(&c->body, p, n);
    }
}

static int ieq(const char *a, size_t n, const char *b) {
    return strlen(b) == n && strncasecmp(a, b, n) == 0;
}

/* The status line and headers in c->head (ending \r\n\r\n at `end`): 0, or -1 with c->msg set. */
static int parse_head(conn_t *c, size_t end) {
    char *p = c->head.p, *stop = c->head.p + end;
    char *eol = memchr(p, '\n', (size_t)(stop - p));
    if (end < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ' || !eol) {
        snprintf(c->msg, sizeof c->msg, "not an HTTP/1.x status line");
        return -1;
    }
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9') {
            snprintf(c->msg, sizeof c->msg, "invalid status code");
            return -1;
        }
        status = status * 10 + (p[i] - '0');
    }
    if (eol - p > 12 && p[12] != ' ' && p[12] != '\r') {
        snprintf(c->msg, sizeof c->msg, "invalid status code");
        return -1;
    }
    c->status = status;
    c->headers.len = 0;
    int close_delimited = 1;
    for (p = eol + 1; p < stop;) {
        eol = memchr(p, '\n', (size_t)(stop - p));
        size_t n = (size_t)(eol - p);
        if (n && p[n - 1] == '\r') n--;
        if (n == 0) break;
        char *colon = memchr(p, ':', n);
        if (colon == NULL || colon == p || p[0] == ' ' || p[0] == '\t' || colon[-1] == ' ') {
            snprintf(c->msg, sizeof c->msg, "invalid header line");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)p[i] < 0x20 && p[i] != '\t') {
                snprintf(c->msg, sizeof c->msg, "a control character in a header");
                return -1;
            }
        }
        size_t nlen = (size_t)(colon - p);
        char *v = colon + 1, *vend = p + n;
        while (v < vend && (*v == ' ' || *v == '\t')) v++;
        while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
        size_t vlen = (size_t)(vend - v);
        buf_add(&c->headers, p, nlen), buf_add(&c->headers, "", 1);
        buf_add(&c->headers, v, vlen), buf_add(&c->headers, "", 1);
        if (ieq(p, nlen, "content-length")) {
            if (c->has_length || vlen == 0 || vlen > 18) goto bad_length;
            long long len = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9') goto bad_length;
                len = len * 10 + (v[i] - '0');
            }
            c->has_length = 1, c->remaining = len;
        } else if (ieq(p, nlen, "transfer-encoding")) {
            /* chunked when it is the last coding */
            const char *t = vend;
            while (t > v && t[-1] != ',') t--;
            while (t < vend && *t == ' ') t++;
            c->chunked = ieq(t, (size_t)(vend - t), "chunked");
        } else if (ieq(p, nlen, "content-type") && c->status == 200 && c->stream) {
            c->sse = vlen >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
        }
        p = eol + 1;
    }
    c->headers_new = 1;
    if (c->chunked && c->has_length) {
        snprintf(c->msg, sizeof c->msg, "both Content-Length and chunked");
        return -1;
    }
    if ((status >= 100 && status < 200) || status == 204 || status == 304) {
        c->hstate = H_DONE;
    } else if (c->chunked) {
        c->hstate = H_CHUNK_SIZE, close_delimited = 0;
    } else if (c->has_length) {
        c->hstate = c->remaining ? H_LENGTH : H_DONE, close_delimited = 0;
    }
    if (close_delimited && c->hstate == H_HEAD) c->hstate = H_CLOSE;
    return 0;
bad_length:
    snprintf(c->msg, sizeof c->msg, "invalid Content-Length");
    return -1;
}

/* Parse one read's bytes; the end code when the exchange is over on the wire. */
static int frame(conn_t *c, const char *p, size_t n, double stamp, double late) {
    while (n) {
        switch (c->hstate) {
            case H_HEAD: {
                size_t before = c->head.len;
                size_t take = n;
                if (before + take > HEAD_MAX) take = HEAD_MAX - before;
                buf_add(&c->head, p, take);
                size_t known = c->head.len < 7 ? c->head.len : 7;
                if (memcmp(c->head.p, "HTTP/1.", known) != 0) { /* told at its first bytes, as httptools does */
                    snprintf(c->msg, sizeof c->msg, "not an HTTP/1.x status line");
                    return E_HTTP;
                }
                char *end = NULL;
                size_t from = before > 3 ? before - 3 : 0;
                for (char *q = c->head.p + from; q + 1 < c->head.p + c->head.len; q++) {
                    if (q[0] == '\n' && q[1] == '\n') {
                        end = q + 2;
                        break;
                    }
                    if (q + 3 < c->head.p + c->head.len && memcmp(q, "\r\n\r\n", 4) == 0) {
                        end = q + 4;
                        break;
                    }
                }
                if (end == NULL) {
                    if (c->head.len >= HEAD_MAX) {
                        snprintf(c->msg, sizeof c->msg, "response headers over %d bytes", HEAD_MAX);
                        return E_HTTP;
                    }
                    return E_NONE;
                }
                size_t used = (size_t)(end - c->head.p) - before;
                if (parse_head(c, (size_t)(end - c->head.p)) < 0) return E_HTTP;
                p += used, n -= used;
                c->head.len = 0;
                if (c->status == 101) return E_UPGRADE;
                if (c->status < 200) { /* an interim response: the real one follows */
                    c->hstate = H_HEAD, c->headers.len = 0, c->headers_new = 0, c->has_length = c->chunked = 0;
                    continue;
                }
                if (c->hstate == H_DONE) return E_COMPLETE;
                break;
            }
            case H_LENGTH: {
                size_t take = (long long)n < c->remaining ? n : (size_t)c->remaining;
                body_bytes(c, p, take, stamp, late);
                p += take, n -= take, c->remaining -= (long long)take;
                if (c->remaining == 0) {
                    c->hstate = H_DONE;
                    return E_COMPLETE;
                }
                break;
            }
            case H_CLOSE:
                body_bytes(c, p, n, stamp, late);
                n = 0;
                break;
            case H_CHUNK_SIZE:
            case H_TRAILER: {
                char *eol = memchr(p, '\n', n);
                size_t take = eol ? (size_t)(eol - p) + 1 : n;
                if (c->head.len + take > 4096) {
                    snprintf(c->msg, sizeof c->msg, "a chunk line over 4096 bytes");
                    return E_HTTP;
                }
                buf_add(&c->head, p, take);
                p += take, n -= take;
                if (!eol) break;
                char *s = c->head.p;
                size_t len = c->head.len - 1;
                c->head.len = 0;
                if (!len || s[len - 1] != '\r') { /* CRLF, as llhttp (and RFC 9112) has it: no bare LF */
                    snprintf(c->msg, sizeof c->msg, "no CR before the LF of a chunk line");
                    return E_HTTP;
                }
                len--;
                if (c->hstate == H_TRAILER) {
                    if (len == 0) {
                        c->hstate = H_DONE;
                        return E_COMPLETE;
                    }
                    break;
                }
                long long size = 0;
                size_t i = 0;
                for (; i < len; i++) { /* 1*HEXDIG: leading zeros as many as the line holds */
                    int d = (s[i] >= '0' && s[i] <= '9')   ? s[i] - '0'
                            : (s[i] >= 'a' && s[i] <= 'f') ? s[i] - 'a' + 10
                            : (s[i] >= 'A' && s[i] <= 'F') ? s[i] - 'A' + 10
                                                           : -1;
                    if (d < 0) break;
                    if (size >> 56) { /* another digit would pass 2^63 */
                        snprintf(c->msg, sizeof c->msg, "chunk size overflow");
                        return E_HTTP;
                    }
                    size = size * 16 + d;
                }
                if (i == 0 || (i < len && s[i] != ';')) { /* as strict as llhttp: no space before an extension */
                    snprintf(c->msg, sizeof c->msg, "invalid character in chunk size");
                    return E_HTTP;
                }
                c->remaining = size;
                c->hstate = size ? H_CHUNK_DATA : H_TRAILER;
                break;
            }
            case H_CHUNK_DATA: {
                size_t take = (long long)n < c->remaining ? n : (size_t)c->remaining;
                body_bytes(c, p, take, stamp, late);
                p += take, n -= take, c->remaining -= (long long)take;
                if (c->remaining == 0) c->hstate = H_CHUNK_CRLF, c->remaining = 0;
                break;
            }
            case H_CHUNK_CRLF: {
                /* \r\n after the chunk's data (a bare \n is refused, as llhttp refuses it) */
                if (*p == '\r' && c->remaining == 0) {
                    c->remaining = 1, p++, n--;
                } else if (*p == '\n' && c->remaining == 1) {
                    c->hstate = H_CHUNK_SIZE, c->remaining = 0, p++, n--;
                } else {
                    snprintf(c->msg, sizeof c->msg, "no CRLF after a chunk's data");
                    return E_HTTP;
                }
                break;
            }
            case H_DONE:
                return E_COMPLETE; /* bytes after the response: dropped with the connection */
        }
    }
    return c->hstate == H_DONE ? E_COMPLETE : E_NONE;
}

/* -- reading ------------------------------------------------------------------------------------ */
static char rbuf[BLOCK];

/* One read; 0 when there was nothing to read. */
static int on_readable(Plane *pl, conn_t *c, Py_ssize_t id) {
    struct iovec iov = {.iov_base = rbuf, .iov_len = BLOCK};
    char cbuf[CMSG_SPACE(sizeof(struct timespec))];
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    double began = mono();
    ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT);
    int e = n < 0 ? errno : 0;
    if (e == EAGAIN || e == EWOULDBLOCK) {
        c->clear_at = began, c->backlog = 0;
        return 0;
    }
    double now = mono(), held = 0.0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(cm), sizeof ts);
            held = wall() - (ts.tv_sec + ts.tv_nsec * 1e-9);
            if (held < 0) held = 0;
        }
    }
    double stamp = now - held;
    if (!c->active || c->end != E_NONE) { /* idle, or over: the peer closed it or sent what nobody asked */
        close_socket(pl, c);
        if (c->active && c->finished) c->active = 0;
        return 1;
    }
    if (n == 0 && c->hstate == H_CLOSE) { /* the body framed by the connection's end */
        close_socket(pl, c);
        c->hstate = H_DONE;
        end_with(c, E_COMPLETE, 0, NULL, now);
        if (c->finished) c->active = 0;
        return 1;
    }
    if (n <= 0) {
        lost(pl, c, id, e, now);
        return 1;
    }
    c->began = 1;
    c->reads++;
    if (stamp < c->last_event) stamp = c->last_event; /* never before the read ahead of it */
    if (c->heard_at > 0 && stamp - c->heard_at > c->quiet) c->quiet = stamp - c->heard_at;
    if (stamp > c->heard_at) c->heard_at = stamp;
    double since = c->backlog ? c->clear_at : fmax(c->clear_at, pl->ready_after);
    double late = stamp > since ? stamp - since : 0.0;
    if (n < BLOCK) c->clear_at = began, c->backlog = 0;
    else c->backlog = 1;
    int end = frame(c, rbuf, (size_t)n, stamp, late);
    if (c->nevents && c->events[c->nevents - 1].read_no == c->reads && c->fed > c->event_end)
        c->events[c->nevents - 1].trailed = 1;
    if (c->finished) { /* draining after Python took its answer */
        if (end == E_COMPLETE) {
            c->active = 0;
            watch(pl, c, EPOLLIN | EPOLLRDHUP, id);
        } else if (end != E_NONE) {
            close_socket(pl, c), c->active = 0;
        }
        return 1;
    }
    if (end != E_NONE) {
        end_with(c, end, 0, end == E_HTTP ? c->msg : NULL, stamp);
    } else if (c->notify_events || (c->headers_new && c->status == 200 && c->stream && !c->sse)) {
        notify(c);
        if (c->nevents >= TAKE_EVENTS || c->blob.len >= TAKE_BYTES) pause_reading(pl, c);
    }
    return 1;
}

/* -- deadlines ------------------------------------------------------------------------------------ */
static double due_of(conn_t *c) {
    if (!c->active || c->state == C_CLOSED) return INFINITY;
    if (c->finished) return c->drain_by;
    if (c->end != E_NONE || c->expired) return INFINITY;
    double d = c->deadline_abs;
    if (c->content_armed && c->stall_s > 0 && c->last_event + c->stall_s < d) d = c->last_event + c->stall_s;
    if (c->state == C_CONNECTING && c->connect_by < d) d = c->connect_by;
    return d;
}

static void expire(Plane *pl, double now) {
    double next = INFINITY;
    for (Py_ssize_t i = 0; i < pl->nconns; i++) {
        conn_t *c = pl->conns[i];
        if (c == NULL) continue;
        double d = due_of(c);
        if (d <= now) {
            if (c->finished) { /* a body held open past DRAIN_S costs the connection */
                close_socket(pl, c), c->active = 0;
                continue;
            }
            if (c->state == C_CONNECTING && c->connect_by <= now) {
                close_socket(pl, c);
                end_with(c, E_CONNECT_TIMEOUT, ETIMEDOUT, NULL, now);
                continue;
            }
            /* first what reached the host in time, had the loop woken late */
            while (c->fd >= 0 && c->state == C_OPEN && c->end == E_NONE && !c->paused && on_readable(pl, c, i)) {
            }
            if (c->end == E_NONE && !c->finished) {
                c->expired = 1, c->expired_at = now;
                notify(c);
            }
            continue;
        }
        if (d < next) next = d;
    }
    pl->next_due = next;
}

static void *run(void *arg) {
    Plane *pl = arg;
    struct epoll_event evs[256];
    waited_t w = {0.0, 0.0};
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the main thread's */
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        double wait = pl->next_due - mono();
        pthread_mutex_unlock(&pl->lock);
        int ms = wait > 1.0 ? 1000 : wait <= 0 ? 0 : (int)ceil(wait * 1000);
        int n = timed_wait(&w, pl->ep, evs, 256, ms);
        pthread_mutex_lock(&pl->lock);
        pl->ready_after = w.ready_after;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == UINT64_MAX) {
                uint64_t v;
                (void)!read(pl->wake, &v, sizeof v);
                continue;
            }
            Py_ssize_t id = (Py_ssize_t)evs[i].data.u64;
            conn_t *c = id < pl->nconns ? pl->conns[id] : NULL;
            if (c == NULL || c->fd < 0) continue;
            if (c->state == C_CONNECTING) {
                int err = 0;
                socklen_t len = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                if (err) {
                    close_socket(pl, c);
                    end_with(c, E_ERROR, err, NULL, mono());
                } else {
                    do_send(pl, c, id);
                }
            } else if (c->state == C_SENDING) {
                do_send(pl, c, id);
            } else {
                on_readable(pl, c, id);
            }
        }
        double now = mono();
        if (now >= pl->next_due) expire(pl, now);
        pthread_mutex_unlock(&pl->lock);
    }
    return NULL;
}

/* -- Python's side -------------------------------------------------------------------------------- */
static void lock(Plane *pl) {
    if (pthread_mutex_trylock(&pl->lock) != 0) {
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&pl->lock);
        Py_END_ALLOW_THREADS
    }
}


static conn_t *conn_of(Plane *pl, Py_ssize_t id) {
    if (id < 0 || id >= pl->nconns || pl->conns[id] == NULL) {
        PyErr_SetString(PyExc_ValueError, "no such connection");
        return NULL;
    }
    return pl->conns[id];
}

static int Plane_init(Plane *self, PyObject *args, PyObject *kw) {
    if (!PyArg_ParseTuple(args, "")) return -1;
    pthread_mutex_init(&self->lock, NULL);
    self->pid = getpid();
    self->ep = epoll_create1(EPOLL_CLOEXEC);
    self->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->ep < 0 || self->wake < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(self->ep, EPOLL_CTL_ADD, self->wake, &ev);
    self->next_due = INFINITY;
    if (pthread_create(&self->thread, NULL, run, self) != 0) {
        PyErr_SetString(PyExc_OSError, "cannot start the native plane's thread");
        return -1;
    }
    pthread_detach(self->thread);
    return 0;
}

static void Plane_dealloc(Plane *self) {
    /* The thread runs as long as the process: a plane is never freed (a forked child leaves its
     * parent's, whose lock may have been held at the fork, alone). */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Plane_connection(Plane *self, PyObject *args) {
    int family, port;
    const char *host;
    unsigned int flow = 0, scope = 0;
    if (!PyArg_ParseTuple(args, "isi|II", &family, &host, &port, &flow, &scope)) return NULL;
    conn_t *c = calloc(1, sizeof *c);
    if (c == NULL) return PyErr_NoMemory();
    c->fd = -1;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&c->addr;
        a->sin_family = AF_INET, a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) goto bad;
        c->addrlen = sizeof *a;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&c->addr;
        a->sin6_family = AF_INET6, a->sin6_port = htons((uint16_t)port);
        a->sin6_flowinfo = htonl(flow), a->sin6_scope_id = scope;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad;
        c->addrlen = sizeof *a;
    } else {
        goto bad;
    }
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->efd < 0) {
        free(c);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    lock(self);
    Py_ssize_t id = self->nconns;
    for (Py_ssize_t i = 0; i < self->nconns; i++)
        if (self->conns[i] == NULL) {
            id = i;
            break;
        }
    if (id == self->nconns) {
        if (self->nconns == self->cap) {
            Py_ssize_t cap = self->cap ? self->cap * 2 : 64;
            conn_t **p = realloc(self->conns, (size_t)cap * sizeof *p);
            if (p == NULL) {
                pthread_mutex_unlock(&self->lock);
                close(c->efd), free(c);
                return PyErr_NoMemory();
            }
            self->conns = p, self->cap = cap;
        }
        self->nconns++;
    }
    self->conns[id] = c;
    pthread_mutex_unlock(&self->lock);
    return Py_BuildValue("ni", id, c->efd);
bad:
    free(c);
    PyErr_Format(PyExc_ValueError, "not an address of family %d: %s", family, host);
    return NULL;
}

static PyObject *Plane_start(Plane *self, PyObject *args) {
    Py_ssize_t id;
    Py_buffer req;
    int stream;
    double connect_s, deadline, stall;
    PyObject *needles;
    if (!PyArg_ParseTuple(args, "ny*pdddO!", &id, &req, &stream, &connect_s, &deadline, &stall, &PyTuple_Type,
                          &needles))
        return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    if (c == NULL) goto fail;
    if (c->active) close_socket(self, c); /* the last response still draining: not worth the wait */
    c->request.len = 0;
    if (buf_add(&c->request, req.buf, (size_t)req.len) < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    c->nneedles = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(needles) && i < NEEDLES; i++) {
        PyObject *b = PyTuple_GET_ITEM(needles, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) == 0 || PyBytes_GET_SIZE(b) > 31) {
            PyErr_SetString(PyExc_ValueError, "a needle is 1 to 31 bytes");
            goto fail;
        }
        memcpy(c->needles[i], PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        c->needle_len[i] = (int)PyBytes_GET_SIZE(b);
        c->nneedles++;
    }
    c->seq++;
    c->active = 1, c->finished = 0, c->keep = 0, c->stream = stream, c->retried = 0, c->content_armed = 0;
    c->connect_s = connect_s, c->deadline_abs = deadline, c->stall_s = stall;
    c->last_event = 0, c->send_at = 0, c->expired = 0, c->expired_at = 0, c->heard_at = 0, c->quiet = 0;
    c->end = E_NONE, c->err = 0, c->msg[0] = 0, c->notify_events = 0;
    uint64_t v;
    (void)!read(c->efd, &v, sizeof v);
    c->notified = 0;
    begin(self, c, id);
    rearm(self, due_of(c));
    pthread_mutex_unlock(&self->lock);
    PyBuffer_Release(&req);
    return PyLong_FromUnsignedLongLong(c->seq);
fail:
    pthread_mutex_unlock(&self->lock);
    PyBuffer_Release(&req);
    return NULL;
}

static PyObject *headers_list(conn_t *c) {
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < c->headers.len;) {
        const char *name = c->headers.p + i;
        size_t nlen = strlen(name);
        const char *value = name + nlen + 1;
        size_t vlen = strlen(value);
        PyObject *pair = Py_BuildValue("(s#s#)", name, (Py_ssize_t)nlen, value, (Py_ssize_t)vlen);
        if (pair == NULL) {
            /* latin-1 bytes beyond ASCII */
            PyErr_Clear();
            PyObject *n = PyUnicode_DecodeLatin1(name, (Py_ssize_t)nlen, NULL);
            PyObject *v = PyUnicode_DecodeLatin1(value, (Py_ssize_t)vlen, NULL);
            pair = n && v ? PyTuple_Pack(2, n, v) : NULL;
            Py_XDECREF(n), Py_XDECREF(v);
        }
        if (pair == NULL || PyList_Append(out, pair) < 0) Py_CLEAR(out);
        Py_XDECREF(pair);
        i += nlen + vlen + 2;
    }
    return out;
}

/* What an exchange brought since the last take. */
static PyObject *Plane_take(Plane *self, PyObject *args) {
    Py_ssize_t id;
    unsigned long long seq;
    if (!PyArg_ParseTuple(args, "nK", &id, &seq)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    PyObject *events = NULL, *headers = Py_None, *out = NULL;
    Py_INCREF(Py_None);
    if (c == NULL) goto done;
    if (c->seq != seq || !c->active) {
        PyErr_SetString(PyExc_ValueError, "no such exchange");
        goto done;
    }
    uint64_t v;
    (void)!read(c->efd, &v, sizeof v);
    c->notified = 0, c->notify_events = 0;
    events = PyList_New((Py_ssize_t)c->nevents);
    if (events == NULL) goto done;
    for (size_t i = 0; i < c->nevents; i++) {
        event_t *e = &c->events[i];
        const char *s = c->blob.p ? c->blob.p + e->off : "";
        int valid = 1;
        PyObject *data = PyUnicode_DecodeUTF8(s, e->len, NULL);
        if (data == NULL) {
            PyErr_Clear();
            valid = 0;
            data = PyUnicode_DecodeUTF8(s, e->len, "replace");
        }
        PyObject *t = data ? Py_BuildValue("(NOddIO)", data, valid ? Py_True : Py_False, e->stamp, e->late, e->read_no,
                                           e->trailed ? Py_True : Py_False)
                           : NULL;
        if (t == NULL) goto done;
        PyList_SET_ITEM(events, (Py_ssize_t)i, t);
    }
    c->nevents = 0, c->blob.len = 0;
    resume_reading(self, c, id);
    if (c->headers_new && c->hstate != H_HEAD) {
        Py_DECREF(headers);
        headers = headers_list(c);
        if (headers == NULL) goto done;
        c->headers_new = 0;
    }
    PyObject *expired = c->expired ? PyFloat_FromDouble(c->expired_at) : (Py_INCREF(Py_None), Py_None);
    out = Py_BuildValue("(iNNy#y#iisdiidNdd)", c->status, headers, events, c->body.p ? c->body.p : "",
                        (Py_ssize_t)c->body.len, c->first.p ? c->first.p : "", (Py_ssize_t)c->first.len, c->end,
                        c->err, c->msg, c->end_at, c->comments, c->line.len || c->ndata || c->named || c->bomn,
                        c->send_at, expired, c->heard_at, c->quiet);
    headers = NULL;
    events = NULL;
    c->body.len = 0;
done:
    Py_XDECREF(events);
    Py_XDECREF(headers);
    pthread_mutex_unlock(&self->lock);
    return out;
}

/* Python's judgement so far: `deadline` the absolute limit, with `stall` > 0 each event's limit too. */
static PyObject *Plane_arm(Plane *self, PyObject *args) {
    Py_ssize_t id;
    unsigned long long seq;
    double deadline, stall;
    int content;
    if (!PyArg_ParseTuple(args, "nKddp", &id, &seq, &deadline, &stall, &content)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    if (c != NULL && c->seq == seq && c->active && !c->finished) {
        c->deadline_abs = deadline, c->stall_s = stall, c->content_armed = content, c->expired = 0;
        rearm(self, due_of(c));
    }
    pthread_mutex_unlock(&self->lock);
    if (c == NULL) return NULL;
    Py_RETURN_NONE;
}

/* The exchange is judged: keep the connection (after a whole response; draining the rest for
 * DRAIN_S at most) or drop it. */
static PyObject *Plane_finish(Plane *self, PyObject *args) {
    Py_ssize_t id;
    unsigned long long seq;
    int keep;
    if (!PyArg_ParseTuple(args, "nKp", &id, &seq, &keep)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    if (c != NULL && c->seq == seq && c->active) {
        c->finished = 1;
        if (!keep || c->fd < 0 || (c->end != E_NONE && c->end != E_COMPLETE)) {
            close_socket(self, c), c->active = 0;
        } else if (c->hstate == H_DONE) {
            c->active = 0;
        } else {
            c->drain_by = mono() + DRAIN_S;
            rearm(self, c->drain_by);
            resume_reading(self, c, id);
        }
    }
    pthread_mutex_unlock(&self->lock);
    if (c == NULL) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Plane_close(Plane *self, PyObject *args) {
    Py_ssize_t id;
    if (!PyArg_ParseTuple(args, "n", &id)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    if (c != NULL) {
        int waited = c->active && !c->finished; /* its request's greenlet hears of it */
        close_socket(self, c);
        if (waited)
            end_with(c, E_ERROR, ECONNABORTED, NULL, mono());
        else
            c->active = 0;
    }
    pthread_mutex_unlock(&self->lock);
    if (c == NULL) return NULL;
    Py_RETURN_NONE;
}

/* The connection is no one's any more: its socket, buffers and slot are freed. */
static PyObject *Plane_drop(Plane *self, PyObject *args) {
    Py_ssize_t id;
    if (!PyArg_ParseTuple(args, "n", &id)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    if (c != NULL) {
        close_socket(self, c);
        close(c->efd);
        free(c->request.p), free(c->head.p), free(c->headers.p), free(c->line.p), free(c->data.p);
        free(c->blob.p), free(c->body.p), free(c->first.p), free(c->events);
        free(c);
        self->conns[id] = NULL;
    }
    pthread_mutex_unlock(&self->lock);
    if (c == NULL) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Plane_opened(Plane *self, PyObject *args) {
    Py_ssize_t id;
    if (!PyArg_ParseTuple(args, "n", &id)) return NULL;
    lock(self);
    conn_t *c = conn_of(self, id);
    int opened = c ? c->opened : 0;
    pthread_mutex_unlock(&self->lock);
    if (c == NULL) return NULL;
    return PyLong_FromLong(opened);
}

static PyMethodDef Plane_methods[] = {
    {"connection", (PyCFunction)Plane_connection, METH_VARARGS,
     "connection(family, host, port[, flowinfo, scope_id]) -> (id, notify_fd)"},
    {"start", (PyCFunction)Plane_start, METH_VARARGS,
     "start(id, request, stream, connect_s, deadline, stall_s, needles) -> seq"},
    {"take", (PyCFunction)Plane_take, METH_VARARGS,
     "take(id, seq) -> (status, headers, events, body, head, end, errno, message, end_at, comments, pending, "
     "send_at, expired_at, heard_at, quiet)"},
    {"arm", (PyCFunction)Plane_arm, METH_VARARGS, "arm(id, seq, deadline, stall_s, content)"},
    {"finish", (PyCFunction)Plane_finish, METH_VARARGS, "finish(id, seq, keep)"},
    {"close", (PyCFunction)Plane_close, METH_VARARGS, "close(id): its socket"},
    {"drop", (PyCFunction)Plane_drop, METH_VARARGS, "drop(id): the connection, freed"},
    {"opened", (PyCFunction)Plane_opened, METH_VARARGS, "opened(id) -> connections opened so far"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PlaneType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "loadtests.dataplane._native.Plane",
    .tp_basicsize = sizeof(Plane),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Plane_init,
    .tp_dealloc = (destructor)Plane_dealloc,
    .tp_methods = Plane_methods,
    .tp_doc = "The native read loop: one epoll thread, HTTP framing and SSE splitting in C.",
};

/* The Python plane's epoll wait, timed as this plane's own (`timed_wait`), without the GIL. */
static __thread waited_t python_wait;

static PyObject *native_wait(PyObject *self, PyObject *args) {
    int ep, max;
    double timeout;
    if (!PyArg_ParseTuple(args, "idi", &ep, &timeout, &max)) return NULL;
    if (max < 1 || max > 4096) {
        PyErr_SetString(PyExc_ValueError, "maxevents must be 1 to 4096");
        return NULL;
    }
    struct epoll_event *evs = PyMem_RawMalloc((size_t)max * sizeof *evs);
    if (evs == NULL) return PyErr_NoMemory();
    int ms = timeout > 0 ? (int)ceil(fmin(timeout, 3600.0) * 1000) : 0, n; /* NaN, or under 0: no wait */
    Py_BEGIN_ALLOW_THREADS n = timed_wait(&python_wait, ep, evs, max, ms);
    Py_END_ALLOW_THREADS
    if (n < 0) {
        PyMem_RawFree(evs);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *t = Py_BuildValue("(iI)", evs[i].data.fd, evs[i].events);
        if (t == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, t);
    }
    PyMem_RawFree(evs);
    return list == NULL ? NULL : Py_BuildValue("(Nd)", list, python_wait.ready_after);
}

static PyMethodDef module_methods[] = {
    {"wait", native_wait, METH_VARARGS,
     "wait(epfd, timeout_s, maxevents) -> ([(fd, events)], ready_after): epoll_wait, and the earliest "
     "time (perf_counter) what it reports can have become readable"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, module_methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&PlaneType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PlaneType);
    if (PyModule_AddObject(m, "Plane", (PyObject *)&PlaneType) < 0) {
        Py_DECREF(&PlaneType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "E_NONE", E_NONE);
    PyModule_AddIntConstant(m, "E_COMPLETE", E_COMPLETE);
    PyModule_AddIntConstant(m, "E_CLOSED", E_CLOSED);
    PyModule_AddIntConstant(m, "E_ERROR", E_ERROR);
    PyModule_AddIntConstant(m, "E_CONNECT_TIMEOUT", E_CONNECT_TIMEOUT);
    PyModule_AddIntConstant(m, "E_HTTP", E_HTTP);
    PyModule_AddIntConstant(m, "E_UPGRADE", E_UPGRADE);
    PyModule_AddIntConstant(m, "E_SSE", E_SSE);
    PyModule_AddIntConstant(m, "E_BODY", E_BODY);
    return m;
}
