/* The ground-truth SSE server of the generator-capacity benchmark, in C: the same wire, schedule
 * and GET /truth as tests/servers/truth.py (read its docstring), at a cost per event far
 * below any client's, so that it is never the limit. Built by the benchmark with the system's cc.
 * An event due within 2 µs is waited for in a spin (a longer spin at SCHED_FIFO near 80,000 events/s
 * ran into the kernel's real-time throttling). Usage: truth PORT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define EVENTS 60
#define TTFT_LO 15000000LL
#define TTFT_HI 25000000LL
#define GAP_LO 5000000LL
#define GAP_HI 7000000LL
#define SPIN_NS 2000LL
#define MAXFD 65536

typedef struct {
    char rid[64], lang[8];
    int64_t arrived, wall;
    int64_t sent[EVENTS];
    int n;
} Truth;

typedef struct {
    int fd, busy, heap_at;
    char buf[8192];
    size_t len;
    int64_t due;
    uint64_t rng;
    const char *event;
    size_t event_len;
    Truth t;
} Conn;

static Conn *conns[MAXFD];
static Conn *heap[MAXFD];
static int heap_n;
static Truth *truths;
static size_t truths_n, truths_cap;
static int32_t *late;
static size_t late_n, late_cap;
static const char *realtime = "SCHED_FIFO";

static int64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t between(Conn *c, int64_t lo, int64_t hi) { /* xorshift64 */
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return lo + (int64_t)(c->rng % (uint64_t)(hi - lo));
}

static void swap(int a, int b) {
    Conn *t = heap[a];
    heap[a] = heap[b];
    heap[b] = t;
    heap[a]->heap_at = a;
    heap[b]->heap_at = b;
}

static void heap_push(Conn *c) {
    int i = heap_n++;
    heap[i] = c;
    c->heap_at = i;
    while (i > 0 && heap[(i - 1) / 2]->due > heap[i]->due) {
        swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_remove(int i) {
    heap[i]->heap_at = -1;
    if (i == --heap_n) return;
    heap[i] = heap[heap_n];
    heap[i]->heap_at = i;
    while (i > 0 && heap[(i - 1) / 2]->due > heap[i]->due) {
        swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_n && heap[l]->due < heap[m]->due) m = l;
        if (r < heap_n && heap[r]->due < heap[m]->due) m = r;
        if (m == i) break;
        swap(i, m);
        i = m;
    }
}

static int send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static const char HEAD[] = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
static char END[256];
static size_t END_LEN;
static const char *LANGS[] = {"de", " Wort", "fr", " mot", "es", " palabra", "it", " parola", "pt", " palavra",
                              "zh", " \xe8\xaf\x8d", "ja", " \xe8\xa8\x80\xe8\x91\x89", NULL};
static char EV[16][256];
static size_t EV_LEN[16];

static size_t chunk(char *out, const char *data) {
    return (size_t)sprintf(out, "%zx\r\n%s\r\n", strlen(data), data);
}

static void make_events(void) {
    char data[200];
    for (int i = 0; LANGS[i]; i += 2) {
        snprintf(data, sizeof data,
                 "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                 "\"finish_reason\":null}]}\n\n",
                 LANGS[i + 1]);
        EV_LEN[i / 2] = chunk(EV[i / 2], data);
    }
    snprintf(data, sizeof data,
             "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word\"},"
             "\"finish_reason\":null}]}\n\n");
    EV_LEN[15] = chunk(EV[15], data);
    snprintf(data, sizeof data,
             "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\n", EVENTS);
    END_LEN = chunk(END, data);
    END_LEN += chunk(END + END_LEN, "data: [DONE]\n\n");
    END_LEN += (size_t)sprintf(END + END_LEN, "0\r\n\r\n");
}

static int event_for(const char *lang) {
    for (int i = 0; LANGS[i]; i += 2)
        if (!strcmp(lang, LANGS[i])) return i / 2;
    return 15;
}

static void header(const char *head, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    out[0] = 0;
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
        if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':') {
            const char *v = p + 3 + n;
            while (*v == ' ') v++;
            size_t k = strcspn(v, "\r");
            if (k >= cap) k = cap - 1;
            memcpy(out, v, k);
            out[k] = 0;
            return;
        }
    }
}

static void send_truth(int fd) {
    size_t cap = 4096 + late_n * 12 + truths_n * (200 + EVENTS * 12), n = 0;
    char *b = malloc(cap);
    n += (size_t)sprintf(b + n, "{\"realtime\":\"%s\",\"lateness_us\":[", realtime);
    for (size_t i = 0; i < late_n; i++) n += (size_t)sprintf(b + n, i ? ",%d" : "%d", late[i]);
    n += (size_t)sprintf(b + n, "],\"requests\":{");
    for (size_t i = 0; i < truths_n; i++) {
        Truth *t = &truths[i];
        n += (size_t)sprintf(b + n, "%s\"%s\":{\"lang\":\"%s\",\"arrived_ns\":%lld,\"wall_ns\":%lld,\"sent_ns\":[",
                             i ? "," : "", t->rid, t->lang, (long long)t->arrived, (long long)t->wall);
        for (int k = 0; k < t->n; k++) n += (size_t)sprintf(b + n, k ? ",%lld" : "%lld", (long long)t->sent[k]);
        n += (size_t)sprintf(b + n, "]}");
    }
    n += (size_t)sprintf(b + n, "}}");
    char head[128];
    int h = sprintf(head, "HTTP/1.1 200 OK\r\ncontent-length: %zu\r\n\r\n", n);
    send_all(fd, head, (size_t)h);
    send_all(fd, b, n);
    free(b);
}

static void keep(Truth *t) {
    if (truths_n == truths_cap) {
        truths_cap = truths_cap ? truths_cap * 2 : 1024;
        truths = realloc(truths, truths_cap * sizeof(Truth));
    }
    truths[truths_n++] = *t;
}

static void handle(Conn *c) {
    if (c->busy) return;
    c->buf[c->len] = 0;
    char *end = strstr(c->buf, "\r\n\r\n");
    if (!end) return;
    *end = 0;
    char v[64];
    header(c->buf, "content-length", v, sizeof v);
    size_t body = (size_t)atol(v), used = (size_t)(end + 4 - c->buf) + body;
    if (c->len < used) {
        *end = '\r';
        return;
    }
    int64_t arrived = mono();
    if (!strncmp(c->buf, "GET /healthz", 12)) {
        static const char OK[] = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        send_all(c->fd, OK, sizeof OK - 1);
    } else if (!strncmp(c->buf, "GET /truth", 10)) {
        send_truth(c->fd);
    } else {
        memset(&c->t, 0, sizeof c->t);
        header(c->buf, "x-request-id", c->t.rid, sizeof c->t.rid);
        header(c->buf, "x-llmchaos-lang", c->t.lang, sizeof c->t.lang);
        if (!c->t.lang[0]) strcpy(c->t.lang, "en");
        int e = event_for(c->t.lang);
        c->event = EV[e];
        c->event_len = EV_LEN[e];
        c->t.arrived = arrived;
        c->t.wall = wall();
        c->rng = 0x9E3779B97F4A7C15ULL;
        for (char *p = c->t.rid; *p; p++) c->rng = (c->rng ^ (uint8_t)*p) * 0x100000001B3ULL;
        if (!c->rng) c->rng = 1;
        send_all(c->fd, HEAD, sizeof HEAD - 1);
        c->busy = 1;
        c->due = arrived + between(c, TTFT_LO, TTFT_HI);
        heap_push(c);
    }
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    if (!c->busy) handle(c);
}

static void drop(int ep, Conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->heap_at >= 0) heap_remove(c->heap_at);
    close(c->fd);
    conns[c->fd] = NULL;
    free(c);
}

static void send_due(int ep) {
    while (heap_n && heap[0]->due <= mono() + SPIN_NS) {
        Conn *c = heap[0];
        int64_t intended = c->due;
        heap_remove(0);
        while (mono() < intended) {
        }
        if (send_all(c->fd, c->event, c->event_len) < 0) {
            drop(ep, c);
            continue;
        }
        int64_t t = mono();
        c->t.sent[c->t.n++] = t - c->t.arrived;
        if (late_n == late_cap) {
            late_cap = late_cap ? late_cap * 2 : 65536;
            late = realloc(late, late_cap * sizeof(int32_t));
        }
        late[late_n++] = (int32_t)((t - intended) / 1000);
        if (c->t.n < EVENTS) {
            c->due = intended + between(c, GAP_LO, GAP_HI);
            heap_push(c);
            continue;
        }
        keep(&c->t);
        if (send_all(c->fd, END, END_LEN) < 0) {
            drop(ep, c);
            continue;
        }
        c->busy = 0;
        handle(c);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    struct sched_param sp = {.sched_priority = 50};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) realtime = "normal priority (SCHED_FIFO refused)";
    make_events();
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) return perror("listen"), 1;
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN}, evs[256];
    ev.data.fd = ls;
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    ev.data.fd = tfd;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    int64_t armed = 0;
    for (;;) {
        int n = epoll_wait(ep, evs, 256, heap_n ? 10 : -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == tfd) {
                uint64_t x;
                if (read(tfd, &x, sizeof x) < 0) {
                }
            } else if (fd == ls) {
                int s;
                while ((s = accept4(ls, NULL, NULL, 0)) >= 0) {
                    if (s >= MAXFD) {
                        close(s);
                        continue;
                    }
                    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Conn *c = calloc(1, sizeof(Conn));
                    c->fd = s;
                    c->heap_at = -1;
                    conns[s] = c;
                    ev.data.fd = s;
                    epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
                }
            } else if (conns[fd]) {
                Conn *c = conns[fd];
                ssize_t r = recv(fd, c->buf + c->len, sizeof c->buf - 1 - c->len, 0);
                if (r <= 0) {
                    drop(ep, c);
                    continue;
                }
                c->len += (size_t)r;
                handle(c);
            }
        }
        send_due(ep);
        if (heap_n && heap[0]->due != armed) {
            armed = heap[0]->due;
            struct itimerspec its = {.it_value = {.tv_sec = armed / 1000000000LL, .tv_nsec = armed % 1000000000LL}};
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
        }
    }
}
