/*
 * file_cache.c - the open-file cache of cabrank-httpd (contract in file_cache.h): normalized
 * path -> refcounted entry holding the open file, its ".gz" sibling, their precomputed
 * header values and, for small files, their bytes. Used by the HTTP service on every serving
 * thread. Owns its entries and, through them, their descriptors and content copies; borrows the
 * root directory fd and the MIME table.
 *
 * Structure: the path hash picks a shard; each shard has a rwlock, a chained hash table and a
 * dense array of its entries that the CLOCK hand sweeps. A hit takes the read lock, bumps the
 * entry's refcount and sets its CLOCK bit, nothing else; misses, replacements and evictions
 * take the write lock, and only after the opens they need are done.
 *
 * Lifetime: an entry has one reference for being in the table plus one per holder. Whoever
 * unlinks it from the table (eviction, replacement, destroy) drops the table's reference after
 * unlocking; whoever drops the last reference closes the descriptors and frees it, so an entry
 * never goes away under a response that is still being sent.
 *
 * Content: a small file's bytes live in the entry's own allocation, after its names, read
 * once by open_entry() before the entry is published; the shard lock's release/acquire
 * publishes them with the rest of the entry. The content_total budget is charged before the
 * read (so concurrent opens cannot overshoot it) and given back when the entry leaves the
 * table, or is dropped unpublished; a replacement is charged while the entry it replaces
 * still is, so near the bound a changed file may come back without a copy.
 *
 * Lock order: one shard lock at a time; never held across a system call.
 */
#include "file_cache.h"

#include <assert.h>
#include <cabrank/clock.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_path.h"
#include "out_buf.h"

#define DEFAULT_ENTRIES       1024
#define DEFAULT_REVALIDATE_MS 1000
#define DEFAULT_SHARDS        16
#define MAX_VICTIMS           8

/* What identifies a version of a file, compared at revalidation. */
struct fc_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
    struct timespec ctim;
};

struct fc_entry {
    /* Immutable once published by insertion under the shard lock. First member: the
     * struct http_file * callers hold is the entry's address. */
    struct http_file pub;
    uint64_t hash;
    const char *key; /* the normalized request path, NUL-terminated, in names[] */
    size_t key_len;
    const char *rel; /* the path opened: key, or key + index_name, in names[] */
    size_t rel_len;
    struct fc_id id;
    struct fc_id gz_id; /* valid when pub.has_gz */
    unsigned nfds;
    /* Content bytes charged to fc->content_bytes, given back by whoever unlinks the entry
     * from the table or drops it unpublished. */
    uint64_t charged;
    /* Atomic. Increments relaxed (the incrementer already holds a reference or the shard
     * lock); the decrement is acq_rel, so the thread dropping the last reference sees every
     * other holder's use before closing and freeing. */
    unsigned refs;
    /* Atomic, relaxed: monotonic ns after which the next hit revalidates; the CAS that moves it
     * forward elects the single revalidating thread. */
    uint64_t check_after_ns;
    /* Atomic, relaxed: CLOCK reference bit, set by hits, cleared by the sweeping hand. */
    unsigned char referenced;
    /* Protected by the shard lock. */
    struct fc_entry *hnext;
    unsigned slot;
    bool in_table;
    char names[];
};

struct fc_shard {
    pthread_rwlock_t lock;
    /* Immutable after create: the length of slots. */
    unsigned cap;
    /* Protected by lock; count and fds are also stored atomically for the stats reader. */
    struct fc_entry **buckets;
    size_t bucket_mask;
    struct fc_entry **slots; /* the entries, dense in slots[0..count) */
    unsigned count;
    unsigned fds;
    unsigned hand;
    /* Atomic counters, relaxed. */
    uint64_t hits;
    uint64_t misses;
    uint64_t opens;
    uint64_t revalidations;
    uint64_t evictions;
    uint64_t replacements;
} __attribute__((aligned(64)));

struct http_file_cache {
    /* Immutable after create. */
    int root_fd;
    const struct http_mime *mime;
    const char *index_name;
    size_t index_len;
    uint64_t revalidate_ns;
    int64_t content_max; /* -1: no file keeps content */
    uint64_t content_total;
    unsigned cap_entries; /* per shard */
    unsigned cap_fds;     /* per shard */
    bool gzip_static;
    bool follow_outside;
    unsigned shard_mask;
    struct fc_shard *shards;
    /* Atomic, relaxed: a budget that guards no other memory. Content bytes charged by the
     * entries in the table and by those being opened. */
    uint64_t content_bytes;
};

static void count(uint64_t *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static uint64_t hash_path(const char *s, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037) ^ len;
    size_t i = 0;

    /* FNV-1a eight bytes a step (every request hashes its path, and a byte
     * a step made a chain of ten multiplies for "/hello.txt"); the shift
     * carries each word's high bytes down into the bucket's low bits. */
    for (; i + 8 <= len; i += 8) {
        uint64_t w;

        memcpy(&w, s + i, sizeof(w));
        h = (h ^ w) * UINT64_C(1099511628211);
        h ^= h >> 32;
    }
    for (; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h ^ (h >> 29);
}

static void id_from_stat(struct fc_id *id, const struct stat *st)
{
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->size = st->st_size;
    id->mtim = st->st_mtim;
    id->ctim = st->st_ctim;
}

static bool is_same_id(const struct fc_id *id, const struct stat *st)
{
    return id->dev == st->st_dev && id->ino == st->st_ino && id->size == st->st_size &&
           id->mtim.tv_sec == st->st_mtim.tv_sec && id->mtim.tv_nsec == st->st_mtim.tv_nsec &&
           id->ctim.tv_sec == st->st_ctim.tv_sec && id->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

static void fill_validator_fields(struct http_file_variant *v)
{
    struct httpd_out o = {.p = v->validator_fields,
                          .end = v->validator_fields + sizeof(v->validator_fields) - 1};

    if (v->last_modified[0] != '\0') {
        HTTPD_OUT_LIT(&o, "\r\nLast-Modified: ");
        httpd_out_put(&o, v->last_modified, HTTP_DATE_LEN);
    }
    HTTPD_OUT_LIT(&o, "\r\nETag: ");
    httpd_out_put(&o, v->etag, v->etag_len);
    *o.p = '\0';
    v->validator_fields_len = (size_t)(o.p - v->validator_fields);
}

static void fill_variant(struct http_file_variant *v, int fd, const struct stat *st, bool gzip)
{
    v->fd = fd;
    v->size = (uint64_t)st->st_size;
    v->mtime = (int64_t)st->st_mtim.tv_sec;
    v->etag_len = http_etag_format(v->etag, sizeof(v->etag), st, gzip);
    if (http_date_format(v->last_modified, v->mtime) == 0)
        v->last_modified[0] = '\0'; /* a year outside 1..9999: no Last-Modified */
    fill_validator_fields(v);
    v->content = NULL;
}

static void fill_ok_fields(struct http_file *f)
{
    struct httpd_out o = {.p = f->ok_fields, .end = f->ok_fields + sizeof(f->ok_fields) - 1};
    const struct http_entity e = {
        .ctype = f->mime,
        .ctype_len = f->mime_len,
        .content_length = f->identity.size,
        .validators = f->identity.validator_fields,
        .validators_len = f->identity.validator_fields_len,
        .accept_ranges = true,
        .vary = f->has_gz,
    };

    http_entity_put(&o, &e);
    /* HTTP_OK_FIELDS_MAX holds the longest type a lookup returns. */
    assert(o.p < o.end);
    f->ok_fields_len = (size_t)(o.p - f->ok_fields);
    *o.p = '\0';
}

static void free_entry(struct fc_entry *e)
{
    if (e->pub.identity.fd >= 0)
        close(e->pub.identity.fd);
    if (e->pub.gz.fd >= 0)
        close(e->pub.gz.fd);
    free(e);
}

static void ref_entry(struct fc_entry *e)
{
    __atomic_fetch_add(&e->refs, 1, __ATOMIC_RELAXED);
}

static void unref_entry(struct fc_entry *e)
{
    if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free_entry(e);
}

/* Builds "<rel>.gz" into buf (HTTP_PATH_MAX bytes); false when it does not fit. */
static bool gz_name(char *buf, const char *rel, size_t rel_len)
{
    if (rel_len + 4 > HTTP_PATH_MAX)
        return false;
    memcpy(buf, rel, rel_len);
    memcpy(buf + rel_len, ".gz", 4);
    return true;
}

/* Charges n content bytes to the budget; false when they do not fit. */
static bool charge_content(struct http_file_cache *fc, uint64_t n)
{
    uint64_t cur = __atomic_load_n(&fc->content_bytes, __ATOMIC_RELAXED);

    do {
        if (n > fc->content_total || cur > fc->content_total - n)
            return false;
    } while (!__atomic_compare_exchange_n(&fc->content_bytes, &cur, cur + n, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

static void uncharge_content(struct http_file_cache *fc, uint64_t n)
{
    if (n > 0)
        __atomic_fetch_sub(&fc->content_bytes, n, __ATOMIC_RELAXED);
}

/* Whether a file of stat st keeps a copy: small enough, and its size charged to the budget. */
static bool reserve_content(struct http_file_cache *fc, const struct stat *st)
{
    return (int64_t)st->st_size <= fc->content_max && charge_content(fc, (uint64_t)st->st_size);
}

/*
 * Reads the st->st_size bytes of fd into buf; false when the file read short or its identity
 * changed meanwhile (then the bytes may be of two versions, and the entry keeps no copy).
 */
static bool read_content(int fd, const struct stat *st, char *buf)
{
    size_t size = (size_t)st->st_size;
    size_t done = 0;
    struct fc_id id;
    struct stat now;

    while (done < size) {
        ssize_t n = pread(fd, buf + done, size - done, (off_t)done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += (size_t)n;
    }
    id_from_stat(&id, st);
    return fstat(fd, &now) == 0 && is_same_id(&id, &now);
}

/*
 * Opens key[0..len) (its index when it ends in '/') and its ".gz" sibling, and builds an
 * unpublished entry holding one reference (the caller's), with a copy of each variant that is
 * small enough and fits the budget. No lock held.
 */
static int open_entry(struct http_file_cache *fc, struct fc_shard *sh, const char *key, size_t len,
                      uint64_t hash, struct fc_entry **out)
{
    bool is_index = key[len - 1] == '/';
    size_t rel_len = len + (is_index ? fc->index_len : 0);
    /* The path opened, then "<path>.gz" while its sibling is opened. */
    char name[HTTP_PATH_MAX];
    struct stat st;
    struct stat gst;
    struct fc_entry *e;
    bool icopy;
    bool gcopy;
    uint64_t isize;
    uint64_t gsize;
    char *rel;
    char *data;
    int fd;
    int gfd = -1;
    int err;

    if (rel_len >= HTTP_PATH_MAX)
        return -ENAMETOOLONG;
    memcpy(name, key, len);
    if (is_index)
        memcpy(name + len, fc->index_name, fc->index_len);
    name[rel_len] = '\0';

    count(&sh->opens);
    err = http_path_open(fc->root_fd, name, fc->follow_outside, &fd, &st);
    if (err < 0)
        return err;
    if (S_ISDIR(st.st_mode)) {
        /* "/dir" wants a redirect to "/dir/"; an index that is a directory is refused. */
        err = is_index ? -EACCES : -EISDIR;
        goto out_close_fd;
    }
    if (fc->gzip_static && rel_len + 4 <= HTTP_PATH_MAX) {
        memcpy(name + rel_len, ".gz", 4);
        count(&sh->opens);
        if (http_path_open(fc->root_fd, name, fc->follow_outside, &gfd, &gst) == 0 &&
            !S_ISREG(gst.st_mode)) {
            close(gfd);
            gfd = -1;
        }
        name[rel_len] = '\0';
    }
    icopy = reserve_content(fc, &st);
    gcopy = gfd >= 0 && reserve_content(fc, &gst);
    isize = icopy ? (uint64_t)st.st_size : 0;
    gsize = gcopy ? (uint64_t)gst.st_size : 0;
    e = malloc(sizeof(*e) + len + 1 + rel_len + 1 + isize + gsize);
    if (e == NULL) {
        err = -ENOMEM;
        goto out_uncharge;
    }
    memcpy(e->names, key, len);
    e->names[len] = '\0';
    rel = e->names + len + 1;
    memcpy(rel, name, rel_len + 1);
    data = rel + rel_len + 1;

    e->hash = hash;
    e->key = e->names;
    e->key_len = len;
    e->rel = rel;
    e->rel_len = rel_len;
    id_from_stat(&e->id, &st);
    fill_variant(&e->pub.identity, fd, &st, false);
    if (icopy && read_content(fd, &st, data))
        e->pub.identity.content = data;
    e->pub.has_gz = gfd >= 0;
    if (gfd >= 0) {
        id_from_stat(&e->gz_id, &gst);
        fill_variant(&e->pub.gz, gfd, &gst, true);
        if (gcopy && read_content(gfd, &gst, data + isize))
            e->pub.gz.content = data + isize;
    } else {
        memset(&e->gz_id, 0, sizeof(e->gz_id));
        memset(&e->pub.gz, 0, sizeof(e->pub.gz));
        e->pub.gz.fd = -1;
    }
    if (fc->mime != NULL) {
        e->pub.mime = http_mime_lookup(fc->mime, rel, rel_len, &e->pub.mime_len);
    } else {
        e->pub.mime = HTTP_MIME_DEFAULT;
        e->pub.mime_len = strlen(HTTP_MIME_DEFAULT);
    }
    fill_ok_fields(&e->pub);
    e->nfds = gfd >= 0 ? 2 : 1;
    e->charged = isize + gsize;
    e->refs = 1;
    e->check_after_ns = cr_clock_event_ns() + fc->revalidate_ns;
    e->referenced = 0;
    e->hnext = NULL;
    e->slot = 0;
    e->in_table = false;
    *out = e;
    return 0;

out_uncharge:
    uncharge_content(fc, isize + gsize);
    if (gfd >= 0)
        close(gfd);
out_close_fd:
    close(fd);
    return err;
}

/*
 * Whether e still describes what is on disk: the file (by name, so a rename over it counts)
 * and the presence and version of its ".gz". A ".gz" that exists but could not be opened (a
 * symlink out of the root) reads as changed each time, costing that file one reopen per
 * interval. No lock held.
 */
static bool is_current(struct http_file_cache *fc, struct fc_shard *sh, const struct fc_entry *e)
{
    char gzbuf[HTTP_PATH_MAX];
    struct stat st;

    count(&sh->revalidations);
    if (fstatat(fc->root_fd, e->rel + 1, &st, 0) < 0 || !is_same_id(&e->id, &st))
        return false;
    if (fc->gzip_static && gz_name(gzbuf, e->rel, e->rel_len)) {
        bool exists = fstatat(fc->root_fd, gzbuf + 1, &st, 0) == 0 && S_ISREG(st.st_mode);

        if (exists != e->pub.has_gz || (exists && !is_same_id(&e->gz_id, &st)))
            return false;
    }
    return true;
}

/* Caller holds sh->lock for writing. */
static struct fc_entry *find_locked(struct fc_shard *sh, uint64_t hash, const char *key, size_t len)
{
    for (struct fc_entry *e = sh->buckets[hash & sh->bucket_mask]; e != NULL; e = e->hnext) {
        if (e->hash == hash && e->key_len == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

/*
 * Caller holds sh->lock for writing. The table's reference passes to the caller; the entry's
 * content charge goes back to the budget.
 */
static void unlink_locked(struct http_file_cache *fc, struct fc_shard *sh, struct fc_entry *e)
{
    struct fc_entry **pp = &sh->buckets[e->hash & sh->bucket_mask];
    unsigned last = sh->count - 1;

    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    /* Keep slots dense: the last entry fills the hole. */
    sh->slots[e->slot] = sh->slots[last];
    sh->slots[e->slot]->slot = e->slot;
    sh->slots[last] = NULL;
    __atomic_store_n(&sh->count, last, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->fds, sh->fds - e->nfds, __ATOMIC_RELAXED);
    e->in_table = false;
    uncharge_content(fc, e->charged);
}

/* Caller holds sh->lock for writing. Takes the caller's table reference to e. */
static void insert_locked(struct fc_shard *sh, struct fc_entry *e)
{
    size_t b = e->hash & sh->bucket_mask;

    assert(sh->count < sh->cap);
    e->hnext = sh->buckets[b];
    sh->buckets[b] = e;
    e->slot = sh->count;
    sh->slots[sh->count] = e;
    __atomic_store_n(&sh->count, sh->count + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->fds, sh->fds + e->nfds, __ATOMIC_RELAXED);
    e->in_table = true;
}

/*
 * Makes room for an entry of nfds descriptors with the CLOCK hand: entries hit since the last
 * sweep get a second chance. The unlinked entries go to victims[] (their table references, to
 * drop after unlocking). Caller holds sh->lock for writing.
 */
static unsigned evict_locked(struct http_file_cache *fc, struct fc_shard *sh, unsigned nfds,
                             struct fc_entry **victims)
{
    unsigned n = 0;

    while (sh->count > 0 && n < MAX_VICTIMS &&
           (sh->count >= fc->cap_entries || sh->fds + nfds > fc->cap_fds)) {
        struct fc_entry *e;

        if (sh->hand >= sh->count)
            sh->hand = 0;
        e = sh->slots[sh->hand];
        if (__atomic_load_n(&e->referenced, __ATOMIC_RELAXED)) {
            __atomic_store_n(&e->referenced, 0, __ATOMIC_RELAXED);
            sh->hand++;
            continue;
        }
        unlink_locked(fc, sh, e);
        victims[n++] = e;
        count(&sh->evictions);
    }
    return n;
}

/*
 * Publishes ne (holding the caller's reference) unless another thread published the key
 * first, in which case that entry is returned referenced and ne is freed. old, if not NULL, is
 * the entry ne replaces and is unlinked if still in the table. Returns the entry for the caller.
 */
static struct fc_entry *publish(struct http_file_cache *fc, struct fc_shard *sh,
                                struct fc_entry *ne, struct fc_entry *old)
{
    struct fc_entry *victims[MAX_VICTIMS + 1];
    unsigned nv = 0;
    struct fc_entry *cur;

    pthread_rwlock_wrlock(&sh->lock);
    if (old != NULL && old->in_table) {
        unlink_locked(fc, sh, old);
        victims[nv++] = old;
        count(&sh->replacements);
    }
    cur = find_locked(sh, ne->hash, ne->key, ne->key_len);
    if (cur != NULL) {
        ref_entry(cur);
    } else {
        nv += evict_locked(fc, sh, ne->nfds, victims + nv);
        ref_entry(ne); /* the table's reference */
        insert_locked(sh, ne);
        cur = ne;
    }
    pthread_rwlock_unlock(&sh->lock);
    for (unsigned i = 0; i < nv; i++)
        unref_entry(victims[i]);
    if (cur != ne) {
        uncharge_content(fc, ne->charged);
        unref_entry(ne);
    }
    return cur;
}

/* Unlinks e if it is still in the table (its file is gone). */
static void drop(struct http_file_cache *fc, struct fc_shard *sh, struct fc_entry *e)
{
    bool unlinked = false;

    pthread_rwlock_wrlock(&sh->lock);
    if (e->in_table) {
        unlink_locked(fc, sh, e);
        unlinked = true;
    }
    pthread_rwlock_unlock(&sh->lock);
    if (unlinked)
        unref_entry(e);
}

int http_file_cache_get(struct http_file_cache *fc, const char *path, size_t len,
                        const struct http_file **out)
{
    uint64_t hash;
    struct fc_shard *sh;
    struct fc_entry *e;
    struct fc_entry *ne;
    uint64_t now;
    uint64_t due;
    int err;

    *out = NULL;
    if (len == 0 || path[0] != '/')
        return -EINVAL;
    if (len >= HTTP_PATH_MAX)
        return -ENAMETOOLONG;
    hash = hash_path(path, len);
    sh = &fc->shards[(hash >> 32) & fc->shard_mask];

    pthread_rwlock_rdlock(&sh->lock);
    e = find_locked(sh, hash, path, len);
    if (e != NULL) {
        ref_entry(e);
        if (!__atomic_load_n(&e->referenced, __ATOMIC_RELAXED))
            __atomic_store_n(&e->referenced, 1, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&sh->lock);

    if (e == NULL) {
        count(&sh->misses);
        err = open_entry(fc, sh, path, len, hash, &ne);
        if (err < 0)
            return err;
        *out = &publish(fc, sh, ne, NULL)->pub;
        return 0;
    }

    now = cr_clock_event_ns(); /* a revalidation period is seconds, or 0 */
    due = __atomic_load_n(&e->check_after_ns, __ATOMIC_RELAXED);
    if (now < due ||
        !__atomic_compare_exchange_n(&e->check_after_ns, &due, now + fc->revalidate_ns, false,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
        is_current(fc, sh, e)) {
        /* Fresh, or another thread is revalidating it, or unchanged on disk. */
        count(&sh->hits);
        *out = &e->pub;
        return 0;
    }
    count(&sh->misses);
    err = open_entry(fc, sh, path, len, hash, &ne);
    if (err < 0) {
        drop(fc, sh, e);
        unref_entry(e);
        return err;
    }
    *out = &publish(fc, sh, ne, e)->pub;
    unref_entry(e);
    return 0;
}

void http_file_cache_ref(const struct http_file *f)
{
    ref_entry((struct fc_entry *)(uintptr_t)f);
}

void http_file_cache_release(void *f)
{
    if (f != NULL)
        unref_entry(f);
}

static unsigned round_pow2(unsigned n)
{
    unsigned p = 1;

    while (p < n && p < (1u << 30))
        p <<= 1;
    return p;
}

int http_file_cache_create(struct http_file_cache **out, const struct http_file_cache_config *cfg)
{
    struct http_file_cache *fc;
    unsigned entries = cfg->max_entries ? cfg->max_entries : DEFAULT_ENTRIES;
    unsigned fds = cfg->max_fds ? cfg->max_fds : 2 * entries;
    unsigned nshards = round_pow2(cfg->shards ? cfg->shards : DEFAULT_SHARDS);
    unsigned i;
    int err;

    *out = NULL;
    if (cfg->root_fd < 0)
        return -EINVAL;
    /* Every shard must hold at least one entry of two descriptors. */
    while (nshards > 1 && (nshards > entries || nshards * 2 > fds))
        nshards >>= 1;
    fc = calloc(1, sizeof(*fc));
    if (fc == NULL)
        return -ENOMEM;
    fc->root_fd = cfg->root_fd;
    fc->mime = cfg->mime;
    fc->index_name = cfg->index_name ? cfg->index_name : "index.html";
    fc->index_len = strlen(fc->index_name);
    fc->revalidate_ns =
        (cfg->revalidate_ms ? cfg->revalidate_ms : DEFAULT_REVALIDATE_MS) * CR_NSEC_PER_MSEC;
    if (cfg->content_max < 0 || cfg->content_total < 0)
        fc->content_max = -1;
    else if (cfg->content_max > 0)
        fc->content_max = (int64_t)cfg->content_max;
    else
        fc->content_max = HTTP_FILE_CACHE_CONTENT_MAX_DEFAULT;
    fc->content_total = cfg->content_total > 0 ? (uint64_t)cfg->content_total
                                               : HTTP_FILE_CACHE_CONTENT_TOTAL_DEFAULT;
    fc->cap_entries = entries / nshards;
    fc->cap_fds = fds / nshards < 2 ? 2 : fds / nshards;
    fc->gzip_static = cfg->gzip_static;
    fc->follow_outside = cfg->follow_outside_symlinks;
    fc->shard_mask = nshards - 1;
    fc->shards = aligned_alloc(64, nshards * sizeof(*fc->shards));
    if (fc->shards == NULL) {
        err = -ENOMEM;
        goto out_free_fc;
    }
    memset(fc->shards, 0, nshards * sizeof(*fc->shards));
    for (i = 0; i < nshards; i++) {
        struct fc_shard *sh = &fc->shards[i];
        size_t nb = round_pow2(fc->cap_entries * 2 < 4 ? 4 : fc->cap_entries * 2);

        sh->buckets = calloc(nb, sizeof(*sh->buckets));
        sh->slots = calloc(fc->cap_entries, sizeof(*sh->slots));
        sh->bucket_mask = nb - 1;
        sh->cap = fc->cap_entries;
        if (sh->buckets == NULL || sh->slots == NULL) {
            free(sh->buckets);
            free(sh->slots);
            err = -ENOMEM;
            goto out_fini_shards;
        }
        err = -pthread_rwlock_init(&sh->lock, NULL);
        if (err < 0) {
            free(sh->buckets);
            free(sh->slots);
            goto out_fini_shards;
        }
    }
    *out = fc;
    return 0;

out_fini_shards:
    while (i-- > 0) {
        pthread_rwlock_destroy(&fc->shards[i].lock);
        free(fc->shards[i].buckets);
        free(fc->shards[i].slots);
    }
    free(fc->shards);
out_free_fc:
    free(fc);
    return err;
}

void http_file_cache_destroy(struct http_file_cache *fc)
{
    if (fc == NULL)
        return;
    for (unsigned i = 0; i <= fc->shard_mask; i++) {
        struct fc_shard *sh = &fc->shards[i];

        for (unsigned j = 0; j < sh->count; j++)
            unref_entry(sh->slots[j]);
        pthread_rwlock_destroy(&sh->lock);
        free(sh->buckets);
        free(sh->slots);
    }
    free(fc->shards);
    free(fc);
}

void http_file_cache_stats(struct http_file_cache *fc, struct http_file_cache_stats *st)
{
    memset(st, 0, sizeof(*st));
    for (unsigned i = 0; i <= fc->shard_mask; i++) {
        struct fc_shard *sh = &fc->shards[i];

        st->hits += __atomic_load_n(&sh->hits, __ATOMIC_RELAXED);
        st->misses += __atomic_load_n(&sh->misses, __ATOMIC_RELAXED);
        st->opens += __atomic_load_n(&sh->opens, __ATOMIC_RELAXED);
        st->revalidations += __atomic_load_n(&sh->revalidations, __ATOMIC_RELAXED);
        st->evictions += __atomic_load_n(&sh->evictions, __ATOMIC_RELAXED);
        st->replacements += __atomic_load_n(&sh->replacements, __ATOMIC_RELAXED);
        st->entries += __atomic_load_n(&sh->count, __ATOMIC_RELAXED);
        st->fds += __atomic_load_n(&sh->fds, __ATOMIC_RELAXED);
    }
    st->content_bytes = __atomic_load_n(&fc->content_bytes, __ATOMIC_RELAXED);
}
