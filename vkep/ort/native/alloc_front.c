/* The allocator front ORT calls for every tensor: freed chunks are kept per size and handed out again
 * without entering Python; only a miss calls py_alloc (vkep/ort/memory.py). Compiled after plugin.c. */
/* ---- allocator front: freed chunks are kept per size and handed out again without entering Python ---- */
#define ALLOC_ALIGN 256
static uint64_t aligned_size(uint64_t size) {
    return size ? (size + ALLOC_ALIGN - 1) / ALLOC_ALIGN * ALLOC_ALIGN : ALLOC_ALIGN;
}
typedef struct { uint64_t size; uint64_t* ptrs; size_t n, cap; } alloc_bucket;
struct vkep_alloc_cache {
    pthread_mutex_t lock;
    uint64_t* keys; uint64_t* vals; size_t cap, count;   /* live chunks: pointer -> size (linear probing) */
    alloc_bucket* buckets; size_t nbuckets, bcap;
    uint64_t live, peak, cached, python_allocs;
    /* while a graph is captured, freed chunks are held for it (its replays use them) instead of reused */
    int holding; uint64_t* held_ptrs; uint64_t* held_sizes; size_t nheld, heldcap;
};

void* py_alloc(OrtAllocator* self, size_t size);

vkep_alloc_cache* vkep_alloc_cache_new(void) {
    vkep_alloc_cache* c = calloc(1, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->cap = 1024;
    c->keys = calloc(c->cap, sizeof(uint64_t));
    c->vals = calloc(c->cap, sizeof(uint64_t));
    return c;
}

void vkep_alloc_cache_delete(vkep_alloc_cache* c) {
    for (size_t i = 0; i < c->nbuckets; i++) free(c->buckets[i].ptrs);
    free(c->held_ptrs); free(c->held_sizes);
    free(c->buckets); free(c->keys); free(c->vals);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static size_t slot_of(uint64_t key, size_t cap) { return (size_t)((key >> 8) * 0x9E3779B97F4A7C15ull) & (cap - 1); }

static void live_put(vkep_alloc_cache* c, uint64_t key, uint64_t val);

static void live_grow(vkep_alloc_cache* c) {
    uint64_t* keys = c->keys; uint64_t* vals = c->vals; size_t cap = c->cap;
    c->cap *= 2; c->count = 0;
    c->keys = calloc(c->cap, sizeof(uint64_t)); c->vals = calloc(c->cap, sizeof(uint64_t));
    for (size_t i = 0; i < cap; i++) if (keys[i]) live_put(c, keys[i], vals[i]);
    free(keys); free(vals);
}

static void live_put(vkep_alloc_cache* c, uint64_t key, uint64_t val) {
    if (2 * (c->count + 1) > c->cap) live_grow(c);
    size_t i = slot_of(key, c->cap);
    while (c->keys[i]) i = (i + 1) & (c->cap - 1);
    c->keys[i] = key; c->vals[i] = val; c->count++;
}

static uint64_t live_take(vkep_alloc_cache* c, uint64_t key) {
    size_t i = slot_of(key, c->cap);
    while (c->keys[i] && c->keys[i] != key) i = (i + 1) & (c->cap - 1);
    if (!c->keys[i]) return 0;
    uint64_t val = c->vals[i];
    c->keys[i] = 0; c->count--;
    /* backward-shift deletion keeps every probe chain unbroken */
    size_t j = i;
    for (;;) {
        j = (j + 1) & (c->cap - 1);
        if (!c->keys[j]) break;
        size_t home = slot_of(c->keys[j], c->cap);
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            c->keys[i] = c->keys[j]; c->vals[i] = c->vals[j]; c->keys[j] = 0; i = j;
        }
    }
    return val;
}

static alloc_bucket* bucket_of(vkep_alloc_cache* c, uint64_t size, int create) {
    for (size_t i = 0; i < c->nbuckets; i++) if (c->buckets[i].size == size) return &c->buckets[i];
    if (!create) return NULL;
    if (c->nbuckets == c->bcap) {
        c->bcap = c->bcap ? 2 * c->bcap : 16;
        c->buckets = realloc(c->buckets, c->bcap * sizeof(alloc_bucket));
    }
    alloc_bucket* b = &c->buckets[c->nbuckets++];
    memset(b, 0, sizeof(*b));
    b->size = size;
    return b;
}

static void mark_live(vkep_alloc_cache* c, uint64_t p, uint64_t aligned) {  /* (under c->lock) */
    live_put(c, p, aligned);
    c->live += aligned;
    if (c->live > c->peak) c->peak = c->live;
}

/* a cached chunk of `size` bytes, now live; 0 when none is cached (nothing enters Python) */
uint64_t vkep_alloc_cache_take(vkep_alloc_cache* c, uint64_t size) {
    uint64_t aligned = aligned_size(size), p = 0;
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned, 0);
    if (b && b->n) {
        p = b->ptrs[--b->n];
        c->cached -= aligned;
        mark_live(c, p, aligned);
    }
    pthread_mutex_unlock(&c->lock);
    return p;
}

static void* vkep_alloc(OrtAllocator* self, size_t size) {
    vkep_alloc_cache* c = ((vkep_allocator*)self)->cache;
    uint64_t p = vkep_alloc_cache_take(c, size);
    if (p) return (void*)(uintptr_t)p;
    uint64_t aligned = aligned_size(size);
    p = (uint64_t)(uintptr_t)py_alloc(self, aligned);
    if (!p) return NULL;
    pthread_mutex_lock(&c->lock);
    c->python_allocs++;
    mark_live(c, p, aligned);
    pthread_mutex_unlock(&c->lock);
    return (void*)(uintptr_t)p;
}

/* a live chunk back to the cache for reuse (or held for a graph being captured) */
void vkep_alloc_cache_free(vkep_alloc_cache* c, uint64_t ptr) {
    pthread_mutex_lock(&c->lock);
    uint64_t size = live_take(c, ptr);
    if (size && c->holding) {
        if (c->nheld == c->heldcap) {
            c->heldcap = c->heldcap ? 2 * c->heldcap : 64;
            c->held_ptrs = realloc(c->held_ptrs, c->heldcap * sizeof(uint64_t));
            c->held_sizes = realloc(c->held_sizes, c->heldcap * sizeof(uint64_t));
        }
        c->held_ptrs[c->nheld] = ptr; c->held_sizes[c->nheld++] = size;
        c->live -= size;
    } else if (size) {
        alloc_bucket* b = bucket_of(c, size, 1);
        if (b->n == b->cap) { b->cap = b->cap ? 2 * b->cap : 8; b->ptrs = realloc(b->ptrs, b->cap * sizeof(uint64_t)); }
        b->ptrs[b->n++] = ptr;
        c->live -= size; c->cached += size;
    }
    pthread_mutex_unlock(&c->lock);
}

static void vkep_free(OrtAllocator* self, void* ptr) {
    if (ptr) vkep_alloc_cache_free(((vkep_allocator*)self)->cache, (uint64_t)(uintptr_t)ptr);
}

/* hands cached chunks back (to return them to the device pool); returns how many were written */
size_t vkep_alloc_cache_drain(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max) {
    size_t k = 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nbuckets && k < max; i++) {
        alloc_bucket* b = &c->buckets[i];
        while (b->n && k < max) { ptrs[k] = b->ptrs[--b->n]; sizes[k++] = b->size; c->cached -= b->size; }
    }
    pthread_mutex_unlock(&c->lock);
    return k;
}

/* holding on: chunks freed from now on are held (see vkep_alloc_cache_take_held) instead of reused */
void vkep_alloc_cache_hold(vkep_alloc_cache* c, int on) {
    pthread_mutex_lock(&c->lock);
    c->holding = on;
    pthread_mutex_unlock(&c->lock);
}

/* hands over the held chunks (the caller gives them back with vkep_alloc_cache_put); returns how many */
size_t vkep_alloc_cache_take_held(vkep_alloc_cache* c, uint64_t* ptrs, uint64_t* sizes, size_t max) {
    size_t k = 0;
    pthread_mutex_lock(&c->lock);
    while (c->nheld && k < max) { c->nheld--; ptrs[k] = c->held_ptrs[c->nheld]; sizes[k++] = c->held_sizes[c->nheld]; }
    pthread_mutex_unlock(&c->lock);
    return k;
}

/* live, peak, cached bytes, allocations that went to Python, live chunk count */
void vkep_alloc_cache_stats(vkep_alloc_cache* c, uint64_t* out) {
    pthread_mutex_lock(&c->lock);
    out[0] = c->live; out[1] = c->peak; out[2] = c->cached; out[3] = c->python_allocs; out[4] = c->count;
    pthread_mutex_unlock(&c->lock);
}

/* how many freed chunks of this size wait for reuse: an Alloc of that size will not fail */
size_t vkep_alloc_cache_count(vkep_alloc_cache* c, uint64_t size) {
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned_size(size), 0);
    size_t n = b ? b->n : 0;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* a chunk Python allocated ahead of ORT's Alloc, so that running out of memory is a clean error
 * (ORT does not check what an allocator returns) */
void vkep_alloc_cache_put(vkep_alloc_cache* c, uint64_t ptr, uint64_t size) {
    pthread_mutex_lock(&c->lock);
    alloc_bucket* b = bucket_of(c, aligned_size(size), 1);
    if (b->n == b->cap) { b->cap = b->cap ? 2 * b->cap : 8; b->ptrs = realloc(b->ptrs, b->cap * sizeof(uint64_t)); }
    b->ptrs[b->n++] = ptr;
    c->cached += b->size;
    pthread_mutex_unlock(&c->lock);
}

int vkep_alloc_cache_owns(vkep_alloc_cache* c, uint64_t ptr) {
    pthread_mutex_lock(&c->lock);
    size_t i = slot_of(ptr, c->cap);
    while (c->keys[i] && c->keys[i] != ptr) i = (i + 1) & (c->cap - 1);
    int found = c->keys[i] == ptr && ptr != 0;
    pthread_mutex_unlock(&c->lock);
    return found;
}

void* vkep_alloc_fn = (void*)vkep_alloc;
void* vkep_free_fn = (void*)vkep_free;

