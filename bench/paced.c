/*
 * An open-loop HTTP/1.1 load generator for the ingress comparison's paced runs (bench/ingress.ts).
 *
 * Requests are scheduled at a fixed rate, whatever the server does; each is sent on a free keep-alive
 * connection at its scheduled time (or, all being busy, as soon as one frees) and its latency is
 * counted from the scheduled time, so a stall delays every request queued behind it, as clients
 * would see it (no coordinated omission). It is C and out of process so that it costs the 2-core
 * machine little: the in-process Node generator competed with what it measured (its own p99 at
 * 12,700 req/s was 3 ms against nginx answering directly).
 *
 * Usage: paced HOST PORT RATE DURATION_S WARMUP_S CONNECTIONS TIMEOUT_S REQUEST_FILE
 *   REQUEST_FILE: the whole request as sent (request line, headers, blank line, body).
 * Prints one JSON object: requests answered in the measured window, sent, statuses, errors,
 * timeouts, latencies (ms: p50 p90 p99 p999 max mean), how many took over 10 ms, the window's
 * duration, the latencies counted to the kernel's receipt of each answer (SO_TIMESTAMPNS), and the
 * generator's own lateness and scheduling (ms on a CPU, ms waiting for one, involuntary switches).
 * PACED_TIMELINE=file (and PACED_WATCH=pids;pids): the measured window slot by slot (see below).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_SIZE 65536

enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, CHUNK_TRAILER };

struct connection {
  int fd;
  int busy;
  double scheduled; /* ms, monotonic: the scheduled time of the request in flight */
  double sent_at;
  /* ms, monotonic: when the kernel's receive path took in the last segment read (SO_TIMESTAMPNS; on
   * loopback that is about when the server sent it); 0 if the read brought no timestamp. */
  double arrived;
  char buffer[BUFFER_SIZE];
  size_t length;
  /* response parsing */
  int headers_done;
  int status;
  int keep_alive;
  enum body_kind body;
  uint64_t remaining;
  enum chunk_state chunk;
};

static const char *host;
static int port;
static char *request;
static size_t request_length;
static struct connection *connections;
static int connection_count;
static int epoll_fd;

static double measure_from, measure_until; /* the measured window of scheduled times */
/* A growing array of measurements (ms); percentile() sorts it when first read after a record(). */
struct samples {
  double *values;
  size_t count, capacity;
  int sorted;
};
static struct samples latencies;
static uint64_t statuses[600];
static uint64_t errors, timeouts, sent_measured;
static double last_completion;
/* The generator's own lateness, so that a tail it caused can be told from the server's: a request
 * sent on a free connection after its scheduled time (one that waited for a busy connection is the
 * server's delay, not counted here), and an answer read after the kernel had it; and each latency
 * counted to the kernel's receipt of the answer instead of to its read. */
static struct samples send_lags, read_lags, arrival_latencies;
static double realtime_minus_monotonic;

/* PACED_TIMELINE=file: the measured window in 10 ms slots of scheduled time (requests, worst latency),
 * to tell one long stall from many short ones and to line a stall up with the server's own logs. */
#define SLOT_MS 10.0
static double *slot_worst;
static uint64_t *slot_requests;
static size_t slot_count;

/* PACED_WATCH=server pids;upstream pids (each comma-separated), with PACED_TIMELINE: every ms of the
 * measured window, where the server's main threads are. One runnable on this generator's CPU while the
 * generator runs there is waiting behind it; one runnable on the CPU of a runnable upstream, one of the
 * two waits. Counted per slot (of sampling time), to line a queue building up with who held its CPU. */
#define MAX_WATCHED 64
static int watched_pid[MAX_WATCHED], watched_upstream[MAX_WATCHED], watched_count;
static uint32_t *slot_samples, *slot_behind_generator, *slot_beside_upstream;
/* And how long the server's main threads ran and waited for a CPU in each slot (µs, from
 * /proc/<pid>/schedstat): a queue building while they waited is a CPU they did not get; while they
 * ran, work that took longer than the rate allows. */
static uint64_t *slot_run_us, *slot_wait_us;
static unsigned long long watched_run_ns[MAX_WATCHED], watched_wait_ns[MAX_WATCHED];
static double next_sample;

/* Scheduled times waiting for a free connection (a ring). */
static double *pending;
static size_t pending_head, pending_count, pending_capacity;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int open_connection(struct connection *c) {
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &address.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
  c->fd = fd;
  c->busy = 0;
  c->length = 0;
  return 0;
}

static void reset_parser(struct connection *c) {
  c->headers_done = 0;
  c->status = 0;
  c->keep_alive = 1;
  c->body = BODY_NONE;
  c->remaining = 0;
  c->chunk = CHUNK_SIZE;
}

static int in_window(double scheduled) { return scheduled >= measure_from && scheduled < measure_until; }

static void record(struct samples *samples, double ms) {
  if (samples->count == samples->capacity) {
    samples->capacity = samples->capacity ? samples->capacity * 2 : 65536;
    samples->values = realloc(samples->values, samples->capacity * sizeof *samples->values);
  }
  samples->values[samples->count++] = ms;
  samples->sorted = 0;
}

static void replace_connection(struct connection *c);

static void send_request(struct connection *c, double scheduled) {
  c->busy = 1;
  c->scheduled = scheduled;
  c->sent_at = now_ms();
  reset_parser(c);
  if (in_window(scheduled)) sent_measured++;
  ssize_t written = write(c->fd, request, request_length);
  /* A request of a few hundred bytes on a socket with nothing else queued goes out whole. */
  if (written != (ssize_t)request_length) {
    if (in_window(scheduled)) errors++;
    replace_connection(c);
  }
}



static void freed(struct connection *c) {
  c->busy = 0;
  if (pending_count) {
    double scheduled = pending[pending_head];
    pending_head = (pending_head + 1) % pending_capacity;
    pending_count--;
    send_request(c, scheduled);
  }
}

/* Closes the connection and opens another in its place, free for the next request (if it opens). */
static void replace_connection(struct connection *c) {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->busy = 0;
  if (open_connection(c) != 0) {
    c->fd = -1;
    return;
  }
  freed(c);
}

static void fail(struct connection *c, int timed_out) {
  if (c->busy && in_window(c->scheduled)) {
    errors++;
    if (timed_out) timeouts++;
  }
  replace_connection(c);
}

static void completed(struct connection *c) {
  double now = now_ms();
  if (in_window(c->scheduled)) {
    record(&latencies, now - c->scheduled);
    if (c->arrived > 0 && c->arrived <= now) {
      record(&read_lags, now - c->arrived);
      record(&arrival_latencies, c->arrived - c->scheduled);
    }
    if (slot_count) {
      size_t slot = (size_t)((c->scheduled - measure_from) / SLOT_MS);
      if (slot < slot_count) {
        slot_requests[slot]++;
        if (now - c->scheduled > slot_worst[slot]) slot_worst[slot] = now - c->scheduled;
      }
    }
    statuses[c->status >= 100 && c->status < 600 ? c->status : 0]++;
    last_completion = now;
  }
  if (c->keep_alive) freed(c);
  else replace_connection(c);
}

/* Reads the response's headers once whole; returns bytes consumed, 0 if incomplete, -1 if malformed. */
static long parse_headers(struct connection *c) {
  char *end = memmem(c->buffer, c->length, "\r\n\r\n", 4);
  if (!end) return c->length >= BUFFER_SIZE ? -1 : 0;
  size_t header_length = (size_t)(end - c->buffer) + 4;
  if (c->length < 12 || memcmp(c->buffer, "HTTP/1.", 7) != 0) return -1;
  c->status = atoi(c->buffer + 9);
  if (c->buffer[7] == '0') c->keep_alive = 0;
  c->body = BODY_UNTIL_CLOSE;
  for (char *line = memchr(c->buffer, '\n', header_length) + 1; line < end; line = memchr(line, '\n', (size_t)(end - line) + 2) + 1) {
    if (!strncasecmp(line, "content-length:", 15)) {
      c->body = BODY_LENGTH;
      c->remaining = strtoull(line + 15, NULL, 10);
    } else if (!strncasecmp(line, "transfer-encoding:", 18)) {
      char *value = line + 18;
      while (*value == ' ') value++;
      if (!strncasecmp(value, "chunked", 7)) c->body = BODY_CHUNKED;
    } else if (!strncasecmp(line, "connection:", 11)) {
      char *value = line + 11;
      while (*value == ' ') value++;
      if (!strncasecmp(value, "close", 5)) c->keep_alive = 0;
    }
  }
  /* No body: 1xx, 204, 304, and a HEAD request's answer. */
  if (c->status == 204 || c->status == 304 || c->status < 200 || !strncmp(request, "HEAD ", 5)) c->body = BODY_NONE;
  if (c->body == BODY_UNTIL_CLOSE) c->keep_alive = 0;
  c->headers_done = 1;
  return (long)header_length;
}

/* Consumes body bytes from the buffer; returns 1 when the response is whole, 0 for more, -1 if malformed. */
static int parse_body(struct connection *c, size_t *offset) {
  for (;;) {
    size_t available = c->length - *offset;
    char *at = c->buffer + *offset;
    switch (c->body) {
      case BODY_NONE:
        return 1;
      case BODY_UNTIL_CLOSE:
        *offset = c->length;
        return 0;
      case BODY_LENGTH: {
        size_t take = available < c->remaining ? available : (size_t)c->remaining;
        *offset += take;
        c->remaining -= take;
        return c->remaining == 0 ? 1 : 0;
      }
      case BODY_CHUNKED:
        if (c->chunk == CHUNK_SIZE || c->chunk == CHUNK_TRAILER || c->chunk == CHUNK_DATA_END) {
          char *line_end = memmem(at, available, "\r\n", 2);
          if (!line_end) return available >= BUFFER_SIZE / 2 ? -1 : 0;
          size_t line_length = (size_t)(line_end - at);
          *offset += line_length + 2;
          if (c->chunk == CHUNK_DATA_END) {
            if (line_length != 0) return -1;
            c->chunk = CHUNK_SIZE;
          } else if (c->chunk == CHUNK_TRAILER) {
            if (line_length == 0) return 1;
          } else {
            c->remaining = strtoull(at, NULL, 16);
            c->chunk = c->remaining == 0 ? CHUNK_TRAILER : CHUNK_DATA;
          }
        } else {
          size_t take = available < c->remaining ? available : (size_t)c->remaining;
          *offset += take;
          c->remaining -= take;
          if (c->remaining) return 0;
          c->chunk = CHUNK_DATA_END;
        }
        break;
    }
  }
}

static void readable(struct connection *c) {
  for (;;) {
    struct iovec io = {.iov_base = c->buffer + c->length, .iov_len = BUFFER_SIZE - c->length};
    union {
      char buffer[CMSG_SPACE(sizeof(struct timespec))];
      struct cmsghdr align;
    } control;
    struct msghdr message = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = control.buffer, .msg_controllen = sizeof control.buffer};
    ssize_t got = recvmsg(c->fd, &message, 0);
    if (got > 0) {
      c->arrived = 0;
      for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_TIMESTAMPNS) {
          struct timespec stamp;
          memcpy(&stamp, CMSG_DATA(header), sizeof stamp);
          c->arrived = stamp.tv_sec * 1e3 + stamp.tv_nsec / 1e6 - realtime_minus_monotonic;
        }
      }
    }
    if (got == 0) {
      /* The server closed: the end of a read-until-close body, else a failure. */
      if (c->busy && c->headers_done && c->body == BODY_UNTIL_CLOSE) {
        c->keep_alive = 0;
        completed(c);
      } else {
        fail(c, 0);
      }
      return;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      fail(c, 0);
      return;
    }
    c->length += (size_t)got;
    if (!c->busy) {
      /* Bytes nobody asked for. */
      fail(c, 0);
      return;
    }
    size_t offset = 0;
    if (!c->headers_done) {
      long consumed = parse_headers(c);
      if (consumed < 0) {
        fail(c, 0);
        return;
      }
      if (consumed == 0) continue;
      offset = (size_t)consumed;
    }
    int whole = parse_body(c, &offset);
    memmove(c->buffer, c->buffer + offset, c->length - offset);
    c->length -= offset;
    if (whole < 0) {
      fail(c, 0);
      return;
    }
    if (whole) {
      c->length = 0;
      completed(c);
      return;
    }
  }
}

/* A thread's state (R: running or waiting for a CPU) and the CPU it is on or queued for, from
 * /proc/<pid>/stat (fields 3 and 39; the name in field 2 may hold spaces and parentheses). */
/* /proc/<pid>/<file> into text, NUL-terminated; -1 if the process is gone. */
static int read_proc(int pid, const char *file, char *text, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t length = read(fd, text, size - 1);
  close(fd);
  if (length <= 0) return -1;
  text[length] = 0;
  return 0;
}

static int thread_placement(int pid, char *state, int *cpu) {
  char text[1024];
  if (read_proc(pid, "stat", text, sizeof text) != 0) return -1;
  char *field = strrchr(text, ')');
  if (!field || field[1] != ' ') return -1;
  field += 2;
  *state = *field;
  for (int number = 3; number < 39; number++) {
    field = strchr(field, ' ');
    if (!field) return -1;
    field++;
  }
  *cpu = atoi(field);
  return 0;
}

/* A thread's time on a CPU and waiting for one, in ns since it started. */
static int thread_times(int pid, unsigned long long *run_ns, unsigned long long *wait_ns) {
  char text[128];
  if (read_proc(pid, "schedstat", text, sizeof text) != 0) return -1;
  return sscanf(text, "%llu %llu", run_ns, wait_ns) == 2 ? 0 : -1;
}

static void sample_placement(double now) {
  if (!watched_count || now < next_sample || now < measure_from || now >= measure_until) return;
  next_sample = now + 1.0;
  size_t slot = (size_t)((now - measure_from) / SLOT_MS);
  if (slot >= slot_count) return;
  int mine = sched_getcpu();
  int behind = 0, beside = 0;
  int upstream_running[1024] = {0};
  char states[MAX_WATCHED];
  int cpus[MAX_WATCHED];
  for (int i = 0; i < watched_count; i++) {
    if (thread_placement(watched_pid[i], &states[i], &cpus[i]) != 0) states[i] = '?';
    if (watched_upstream[i] && states[i] == 'R' && cpus[i] >= 0 && cpus[i] < 1024) upstream_running[cpus[i]] = 1;
  }
  for (int i = 0; i < watched_count; i++) {
    unsigned long long run_ns, wait_ns;
    if (watched_upstream[i] || thread_times(watched_pid[i], &run_ns, &wait_ns) != 0) continue;
    /* The first sample only sets the baseline. */
    if (watched_run_ns[i] || watched_wait_ns[i]) {
      slot_run_us[slot] += (run_ns - watched_run_ns[i]) / 1000;
      slot_wait_us[slot] += (wait_ns - watched_wait_ns[i]) / 1000;
    }
    watched_run_ns[i] = run_ns;
    watched_wait_ns[i] = wait_ns;
  }
  for (int i = 0; i < watched_count; i++) {
    if (watched_upstream[i] || states[i] != 'R') continue;
    if (cpus[i] == mine) behind = 1;
    if (cpus[i] >= 0 && cpus[i] < 1024 && upstream_running[cpus[i]]) beside = 1;
  }
  slot_samples[slot]++;
  slot_behind_generator[slot] += behind;
  slot_beside_upstream[slot] += beside;
}

static void dispatch(double scheduled) {
  for (int i = 0; i < connection_count; i++) {
    struct connection *c = &connections[i];
    if (!c->busy && c->fd >= 0) {
      if (in_window(scheduled)) record(&send_lags, now_ms() - scheduled);
      send_request(c, scheduled);
      return;
    }
  }
  if (pending_count == pending_capacity) {
    if (in_window(scheduled)) errors++; /* cannot happen: the ring holds every scheduled request */
    return;
  }
  pending[(pending_head + pending_count) % pending_capacity] = scheduled;
  pending_count++;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(struct samples *samples, double fraction) {
  if (!samples->count) return 0;
  if (!samples->sorted) {
    qsort(samples->values, samples->count, sizeof *samples->values, compare);
    samples->sorted = 1;
  }
  size_t index = (size_t)(fraction * (double)samples->count + 0.999999);
  if (index < 1) index = 1;
  if (index > samples->count) index = samples->count;
  return samples->values[index - 1];
}

int main(int argc, char **argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: paced HOST PORT RATE DURATION_S WARMUP_S CONNECTIONS TIMEOUT_S REQUEST_FILE\n");
    return 2;
  }
  host = argv[1];
  port = atoi(argv[2]);
  double rate = atof(argv[3]), duration_ms = atof(argv[4]) * 1e3, warmup_ms = atof(argv[5]) * 1e3;
  connection_count = atoi(argv[6]);
  double timeout_ms = atof(argv[7]) * 1e3;
  FILE *file = fopen(argv[8], "rb");
  if (!file || rate <= 0 || connection_count <= 0) {
    fprintf(stderr, "paced: bad arguments\n");
    return 2;
  }
  request = malloc(1 << 20);
  request_length = fread(request, 1, 1 << 20, file);
  fclose(file);

  epoll_fd = epoll_create1(0);
  connections = calloc((size_t)connection_count, sizeof *connections);
  for (int i = 0; i < connection_count; i++) {
    if (open_connection(&connections[i]) != 0) {
      fprintf(stderr, "paced: cannot connect to %s:%d: %s\n", host, port, strerror(errno));
      return 1;
    }
  }
  pending_capacity = (size_t)(rate * (duration_ms + warmup_ms) / 1e3) + 16;
  pending = malloc(pending_capacity * sizeof *pending);

  double interval = 1e3 / rate;
  {
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    realtime_minus_monotonic = real.tv_sec * 1e3 + real.tv_nsec / 1e6 - now_ms();
  }
  double start = now_ms();
  measure_from = start + warmup_ms;
  measure_until = measure_from + duration_ms;
  const char *timeline = getenv("PACED_TIMELINE");
  double wall_from = measure_from + realtime_minus_monotonic;
  if (timeline && *timeline) {
    slot_count = (size_t)(duration_ms / SLOT_MS) + 1;
    slot_worst = calloc(slot_count, sizeof *slot_worst);
    slot_requests = calloc(slot_count, sizeof *slot_requests);
    const char *watch = getenv("PACED_WATCH");
    if (watch && *watch) {
      int upstream = 0;
      for (const char *at = watch; *at && watched_count < MAX_WATCHED;) {
        if (*at == ';') upstream = 1;
        if (*at >= '0' && *at <= '9') {
          char *end;
          watched_pid[watched_count] = (int)strtol(at, &end, 10);
          watched_upstream[watched_count++] = upstream;
          at = end;
          continue;
        }
        at++;
      }
      slot_samples = calloc(slot_count, sizeof *slot_samples);
      slot_behind_generator = calloc(slot_count, sizeof *slot_behind_generator);
      slot_beside_upstream = calloc(slot_count, sizeof *slot_beside_upstream);
      slot_run_us = calloc(slot_count, sizeof *slot_run_us);
      slot_wait_us = calloc(slot_count, sizeof *slot_wait_us);
    }
  }
  double next = start;
  struct epoll_event events[256];
  for (;;) {
    double now = now_ms();
    while (next <= now && next < measure_until) {
      dispatch(next);
      next += interval;
    }
    int in_flight = (int)pending_count;
    for (int i = 0; i < connection_count; i++) in_flight += connections[i].busy;
    if (next >= measure_until && in_flight == 0) break;
    /* Requests unanswered for the timeout fail (their connection is replaced). */
    for (int i = 0; i < connection_count; i++) {
      struct connection *c = &connections[i];
      if (c->busy && now - c->sent_at > timeout_ms) fail(c, 1);
    }
    if (next >= measure_until && now > measure_until + timeout_ms * 2) break;
    double wait = next < measure_until ? next - now : 50;
    /* Sampling where the watched threads are needs a wake-up each ms of the window, whatever the rate. */
    if (watched_count && now >= measure_from && now < measure_until && next_sample - now < wait) wait = next_sample - now;
    if (wait < 0) wait = 0;
    struct timespec timeout = {.tv_sec = (time_t)(wait / 1e3), .tv_nsec = (long)((wait - (double)(long)(wait / 1e3) * 1e3) * 1e6)};
    int ready = epoll_pwait2(epoll_fd, events, 256, &timeout, NULL);
    for (int i = 0; i < ready; i++) readable(events[i].data.ptr);
    sample_placement(now_ms());
  }

  if (slot_count) {
    FILE *out = fopen(timeline, "w");
    if (out) {
      fprintf(out, "# wall-clock ms (Unix epoch) at the slot's start, requests scheduled in it, worst latency ms%s\n",
              watched_count ? "; with PACED_WATCH, samples taken in the slot, of them with a server thread waiting behind the generator, beside a runnable upstream; µs the server's main threads ran, waited for a CPU" : "");
      for (size_t i = 0; i < slot_count; i++) {
        fprintf(out, "%.0f %llu %.3f", wall_from + (double)i * SLOT_MS, (unsigned long long)slot_requests[i], slot_worst[i]);
        if (watched_count)
          fprintf(out, " %u %u %u %llu %llu", slot_samples[i], slot_behind_generator[i], slot_beside_upstream[i], (unsigned long long)slot_run_us[i],
                  (unsigned long long)slot_wait_us[i]);
        fputc('\n', out);
      }
      fclose(out);
    }
  }
  double sum = 0;
  for (size_t i = 0; i < latencies.count; i++) sum += latencies.values[i];
  double window_ms = (last_completion > measure_until ? last_completion : measure_until) - measure_from;
  printf("{\"requests\":%zu,\"sent\":%llu,\"errors\":%llu,\"timeouts\":%llu,\"durationS\":%.3f,", latencies.count,
         (unsigned long long)sent_measured, (unsigned long long)errors, (unsigned long long)timeouts, window_ms / 1e3);
  printf("\"latencyMs\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f,\"mean\":%.3f},", percentile(&latencies, 0.5),
         percentile(&latencies, 0.9), percentile(&latencies, 0.99), percentile(&latencies, 0.999), percentile(&latencies, 1),
         latencies.count ? sum / (double)latencies.count : 0);
  /* How many of each were measured, and their p99 and max only where there were some: no timestamp
   * (a kernel without them) must not read as a generator that was never late. */
  printf("\"generatorLagMs\":{\"sends\":%zu,", send_lags.count);
  if (send_lags.count) printf("\"sendP99\":%.3f,\"sendMax\":%.3f,", percentile(&send_lags, 0.99), percentile(&send_lags, 1));
  printf("\"reads\":%zu", read_lags.count);
  if (read_lags.count) printf(",\"readP99\":%.3f,\"readMax\":%.3f", percentile(&read_lags, 0.99), percentile(&read_lags, 1));
  printf("},");
  size_t over_ten = 0;
  for (size_t i = 0; i < latencies.count; i++) over_ten += latencies.values[i] > 10.0;
  printf("\"overTenMs\":%zu,", over_ten);
  if (arrival_latencies.count)
    printf("\"arrivalLatencyMs\":{\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f},", percentile(&arrival_latencies, 0.5),
           percentile(&arrival_latencies, 0.99), percentile(&arrival_latencies, 1));
  printf("\"statusCodes\":{");
  int first = 1;
  for (int code = 0; code < 600; code++) {
    if (!statuses[code]) continue;
    printf("%s\"%d\":%llu", first ? "" : ",", code, (unsigned long long)statuses[code]);
    first = 0;
  }
  printf("}");
  /* The generator's own scheduling over its whole run: while it waits for a CPU, every request
   * it has in flight looks slower, so a tail it reports is read beside this. */
  unsigned long long run_ns = 0, wait_ns = 0;
  FILE *schedstat = fopen("/proc/self/schedstat", "r");
  if (schedstat) {
    if (fscanf(schedstat, "%llu %llu", &run_ns, &wait_ns) != 2) run_ns = wait_ns = 0;
    fclose(schedstat);
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  printf(",\"scheduler\":{\"runMs\":%.1f,\"waitMs\":%.1f,\"preempted\":%ld}}\n", run_ns / 1e6, wait_ns / 1e6, usage.ru_nivcsw);
  return 0;
}
