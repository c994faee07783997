//! The memtable's skiplist: nodes in an arena, one writer, lock-free readers
//! (LevelDB `db/skiplist.h` and `util/arena.cc`, RocksDB's `InlineSkipList`).
//!
//! Why not `crossbeam-skiplist`: it allocates three times per entry (node,
//! key, value) and frees through epochs; W1's fills spent their time in the
//! allocator, and 64 bytes of overhead per entry made a 64 MiB memtable hold a
//! quarter fewer entries than RocksDB's, so Ebb flushed more, smaller L0 files.
//! Here an entry is one bump allocation: header, tower, key and value together.
//!
//! Contract:
//! 1. Keys are internal keys, in the internal order of the list's
//!    [`UserComparator`]. Inserting a
//!    key equal to one present replaces it (the old node is unlinked, as
//!    `crossbeam`'s `insert` did); internal keys carry unique sequence numbers,
//!    so this happens only with a WAL replayed over itself.
//! 2. Inserts are serialised by the writer mutex (uncontended: the memtable
//!    has one writer, the write-group leader). Readers take no lock.
//! 3. A node is written completely before it is published: its tower is
//!    stored first, then each predecessor's link with `Release`; readers load
//!    links with `Acquire`, so a node they reach is fully initialised. Nodes
//!    are never changed after that except their links, and never freed before
//!    the list is dropped, so a reader holding a node pointer (a [`Cursor`],
//!    which keeps its list alive: contract 10) can always follow its links,
//!    even if a replace unlinked it meanwhile.
//! 4. Memory is charged as the bytes of the nodes (header, tower, key and
//!    value, rounded to 8), not the arena's blocks, so tiny memtables in tests
//!    flush at the same points whatever the block size.
//! 5. A list made [`SkipList::with_key_index`] also keeps, for point
//!    lookups and seeks, a hash index from each user key to its newest
//!    node ([`Cursor::seek_versions`], [`Cursor::seek`]): a lookup then
//!    reads a slot or two and the key's versions instead of descending the
//!    list, and a key the index does not hold is not in the list at all
//!    (until the index saturates; then such a lookup descends; a seek to
//!    such a key always descends). A slot is stored after its
//!    node is linked, with `Release`, and before the writer publishes the
//!    write's sequence number, so a reader at a snapshot that includes the
//!    write finds the slot. Only byte-equal user keys are equal under the
//!    built-in orders, which alone get an index. It grows in tiers: a small
//!    table made with the list, and each next one eight times larger (the
//!    last the whole index), made when the one before fills and given
//!    every key it holds before readers see it, so its memory follows the
//!    keys the list holds and a lookup probes the newest tier alone. It is
//!    reported with the memtable's memory
//!    ([`crate::memtable::MemTable::allocated_bytes`]) but not charged
//!    against `write_buffer_size`, so a memtable holds as many entries as
//!    without it.
//! 6. Each node records its level-0 predecessor, which only the writer
//!    reads and changes (readers never follow it). An insert of a key's new
//!    version with a tower of height 1 links it between the key's newest node
//!    (from the index) and that node's predecessor, without a descent, once
//!    it has checked that the two are still adjacent and that the key falls
//!    strictly between them ([`SkipList::insert_before_newest`]).
//! 7. A list made [`SkipList::with_prefix_hints`] keeps, for the writer
//!    alone, a table from a hash of a key prefix (the column family's
//!    prefix extractor, given with each insert) to the node last inserted
//!    with that prefix. An insert with a tower of height 1 whose prefix has a
//!    hint walks level 0 from that node, through successors or recorded
//!    predecessors, at most [`HINT_WALK`] steps, to where the key belongs,
//!    and links it there, once it has checked that the hint is still in the
//!    list, that the two nodes it lands between are adjacent and that the
//!    key falls strictly between them ([`SkipList::insert_near_hint`]).
//!    Keys that share a prefix are neighbours in the list, so a key whose
//!    prefix the memtable holds needs no descent. Anything else descends.
//! 8. A list made [`SkipList::with_prefix_firsts`] (a built-in order and
//!    the column family's prefix extractor) also keeps, for readers, a
//!    table from a hash of a prefix to the *first* node of the keys with
//!    that prefix. Invariant: a slot holds null or a node that is the first
//!    in the list whose user key's prefix is its own. An insert stores its
//!    node in its prefix's slot, with `Release` after the node is linked,
//!    when the node's level-0 predecessor is the head or has another prefix
//!    (or none): that is when the node became its prefix's first, and the
//!    only way a prefix's first changes (nodes leave the list only by a
//!    replace, which turns the table off for good). A seek to a target
//!    whose prefix the slot's node has then needs no descent from the
//!    head: keys of one prefix are contiguous in the order (the extractor's
//!    contract), so nothing lies between a target at or before that node
//!    and the node, and a target after it is found by descending from that
//!    node's own tower ([`SkipList::seek_from_first`], at most
//!    [`FIRST_WALK`] steps, else from the head). A writer's insert is in the
//!    table before its sequence number is published, so a reader at a
//!    snapshot including it finds it (as contract 5).
//! 9. Beside each link above level 0, a node keeps the [`key_prefix`] (the
//!    user key's first eight bytes) of the node the link leads to, stored
//!    by the writer before the link (0 with a null link). Under the
//!    bytewise order a descent compares the target's prefix with it first:
//!    when the target's is lower, the linked node is above the target and
//!    the descent goes down without loading that node (on a large list,
//!    most of those loads miss the cache). A reader may pair a link with
//!    the prefix of the node it led to before an insert (a larger key) or
//!    after it; either way going down early on a level above 0 is only a
//!    longer search, never a wrong one (the node it goes down from is below
//!    the target, and each lower level holds every node of the level
//!    above), and level 0 always loads. The writer's view is exact: it
//!    stores every prefix itself.
//! 10. A [`Cursor`] holds a node pointer and reaches its list only through
//!     the [`ListRef`] it was made with and owns: a borrow of the list
//!     ([`SkipList::cursor`]: a `Cursor<&'a SkipList>` cannot outlive the
//!     list), or an `Arc` of what holds the list ([`ListOwner`]: the
//!     memtable iterator's `Cursor<Arc<MemTable>>` keeps its memtable
//!     alive). No function takes a cursor and a list apart, so a cursor
//!     reads only the list it was made on, and only while that list lives;
//!     the borrow checker refuses anything else. A cursor used after its
//!     list is gone:
//!
//! ```compile_fail,E0597
//! use ebb::comparator::UserComparator;
//! use ebb::internals::memtable::skiplist::SkipList;
//!
//! let mut cursor = {
//!     let list = SkipList::new(UserComparator::BYTEWISE);
//!     list.cursor()
//! }; // the list is dropped here, while the cursor still borrows it
//! cursor.seek_to_first();
//! ```
//!
//! or kept while its list is dropped:
//!
//! ```compile_fail,E0505
//! # use ebb::comparator::UserComparator;
//! # use ebb::internals::memtable::skiplist::SkipList;
//! let list = SkipList::new(UserComparator::BYTEWISE);
//! let mut cursor = list.cursor();
//! drop(list); // the list cannot go while the cursor borrows it
//! cursor.seek_to_first();
//! ```
//!
//! and a cursor of one list asked to read another (its methods take no
//! list: it reads the one it holds):
//!
//! ```compile_fail,E0061
//! # use ebb::comparator::UserComparator;
//! # use ebb::internals::memtable::skiplist::SkipList;
//! let (one, other) = (SkipList::new(UserComparator::BYTEWISE), SkipList::new(UserComparator::BYTEWISE));
//! let mut cursor = one.cursor();
//! cursor.seek_to_first(&other);
//! ```
//!
//! What compiles reads the list the cursor was made on:
//!
//! ```
//! # use ebb::comparator::UserComparator;
//! # use ebb::internals::memtable::skiplist::SkipList;
//! let list = SkipList::new(UserComparator::BYTEWISE);
//! let mut cursor = list.cursor();
//! cursor.seek_to_first();
//! assert!(!cursor.valid());
//! ```
//!
//! (With `internals`, `ebb::internals::memtable::skiplist` re-exports
//! [`SkipList`] for these examples alone: the rest of this module stays
//! `pub(crate)`, so that the cursor's search paths are not exported from
//! the crate, and call their helpers directly.)

// The whole module is the unsafe core of the memtable: raw node pointers
// into an arena, each use argued at its `SAFETY` comment.
#![allow(unsafe_code)]

use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::comparator::UserComparator;
use crate::key::trailer;
use crate::prefix::SliceTransform;
use crate::util::prefetch;

/// Tallest tower (LevelDB's 12: with branching 4, enough for 4^12 = 16 M
/// entries before searches degrade, and memtables hold far fewer).
pub(crate) const MAX_HEIGHT: usize = 12;
/// One in `BRANCHING` nodes of height h also reaches h + 1.
const BRANCHING: u32 = 4;
/// Most descents [`SkipList::warm`] runs at once: enough misses in flight to
/// cover a core's outstanding-load slots, few enough that the nodes stay in
/// L1/L2 until the inserts that follow.
pub(crate) const WARM_LANES: usize = 16;
/// Arena block size. Nodes over a quarter of it get a block of their own
/// (LevelDB's rule), so a block wastes at most a quarter at its end.
const BLOCK_BYTES: usize = 64 << 10;

/// A node's fixed part; its tower of `height` links follows, then the key and
/// the value. `repr(C)` so the tower starts right after these 16 bytes.
///
/// The tower holds level 0's link alone, then for each upper level the link
/// and the [`key_prefix`] of the node it links to (contract 9): 8 bytes for
/// level 0, 16 for each level above ([`tower_bytes`]).
#[repr(C)]
struct Node {
    key_len: u32,
    value_len: u32,
    /// The tower's height (low 16 bits, fixed before the node is published)
    /// and, above them, the node's level-0 predecessor (48 bits, 0 when not
    /// known), which only the writer reads and changes: an insert of a key's
    /// new version splices it in before the key's newest node without a
    /// descent ([`SkipList::insert_before_newest`]).
    meta: AtomicU64,
    tower: [AtomicPtr<Node>; 0],
}

const HEADER: usize = std::mem::size_of::<Node>();
const _: () = assert!(HEADER == 16 && std::mem::align_of::<Node>() == 8);

/// Bytes of a tower of `height` (at least 1) levels: level 0's link, then a
/// link and a key prefix for each level above.
const fn tower_bytes(height: usize) -> usize {
    16 * height - 8
}

/// Offset of link `level` from the tower's start.
const fn link_offset(level: usize) -> usize {
    if level == 0 {
        0
    } else {
        16 * level - 8
    }
}

/// The first eight bytes of an internal key's user key, zero-padded, read
/// big-endian (contract 9). Under the bytewise order, `key_prefix(a) <
/// key_prefix(b)` implies `a < b`: the first byte where the padded forms
/// differ is a byte of both keys (so `a`'s is lower), or the end of `a`
/// (so `a` is a proper prefix of `b`); it cannot be the end of `b`, whose
/// padding is zero.
fn key_prefix(internal_key: &[u8]) -> u64 {
    let user_key = &internal_key[..internal_key.len().saturating_sub(crate::key::TRAILER_LEN)];
    let mut bytes = [0u8; 8];
    let n = user_key.len().min(8);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(bytes)
}

impl Node {
    fn size(height: usize, key_len: usize, value_len: usize) -> usize {
        (HEADER + tower_bytes(height) + key_len + value_len).next_multiple_of(8)
    }

    /// Low bits of `meta` holding the height.
    const HEIGHT_BITS: u32 = 16;

    /// The tower's height.
    ///
    /// # Safety
    /// `node` points to an initialised node of this list.
    unsafe fn height(node: *const Node) -> usize {
        // SAFETY: caller's contract. The height bits never change once the
        // node is published; the writer's stores of the predecessor keep them.
        unsafe { ((*node).meta.load(AtomicOrdering::Relaxed) & ((1 << Self::HEIGHT_BITS) - 1)) as usize }
    }

    /// The level-0 predecessor recorded for `node`, or null. Writer only.
    ///
    /// # Safety
    /// As [`Node::height`].
    unsafe fn prev(node: *const Node) -> *const Node {
        // SAFETY: caller's contract.
        unsafe { ((*node).meta.load(AtomicOrdering::Relaxed) >> Self::HEIGHT_BITS) as *const Node }
    }

    /// Records `prev` as `node`'s level-0 predecessor (none when `prev`'s
    /// address does not fit in 48 bits). Writer only.
    ///
    /// # Safety
    /// As [`Node::height`]; `prev` is null, the head or a node of this list.
    unsafe fn set_prev(node: *const Node, prev: *const Node) {
        let addr = prev as u64;
        let addr = if addr >> (64 - Self::HEIGHT_BITS) == 0 { addr } else { 0 };
        // SAFETY: caller's contract.
        unsafe {
            let height = Node::height(node) as u64;
            (*node).meta.store(addr << Self::HEIGHT_BITS | height, AtomicOrdering::Relaxed);
        }
    }

    /// Link `level` of `node`. Requires `level < height`.
    ///
    /// # Safety
    /// `node` points to an initialised node of this list with `level < height`.
    unsafe fn link(node: *const Node, level: usize) -> *const AtomicPtr<Node> {
        // SAFETY (caller): the tower follows the header inside the node's
        // allocation, and link `level` lies within a tower of more than
        // `level` levels; `addr_of!` does not create a reference to the
        // zero-length array, so the pointer keeps the allocation's provenance.
        unsafe { ptr::addr_of!((*node).tower).cast::<u8>().add(link_offset(level)).cast::<AtomicPtr<Node>>() }
    }

    /// The key prefix stored beside link `level` (`level >= 1`).
    ///
    /// # Safety
    /// As [`Node::link`], and `level >= 1`.
    unsafe fn prefix_slot(node: *const Node, level: usize) -> *const AtomicU64 {
        debug_assert!(level >= 1);
        // SAFETY: caller's contract: the 8 bytes after an upper link are its prefix.
        unsafe { Node::link(node, level).cast::<u8>().add(8).cast::<AtomicU64>() }
    }

    /// # Safety
    /// As [`Node::link`].
    unsafe fn next(node: *const Node, level: usize) -> *mut Node {
        // SAFETY: caller's contract; the link is initialised before the node
        // is published (contract 3).
        unsafe { (*Node::link(node, level)).load(AtomicOrdering::Acquire) }
    }

    /// The key prefix of the node link `level` leads to, as the writer
    /// last stored it (contract 9); 0 for level 0, which keeps none.
    ///
    /// # Safety
    /// As [`Node::link`].
    unsafe fn next_prefix(node: *const Node, level: usize) -> u64 {
        if level == 0 {
            return 0;
        }
        // SAFETY: caller's contract.
        unsafe { (*Node::prefix_slot(node, level)).load(AtomicOrdering::Relaxed) }
    }

    /// Links `node` at `level` to `to`, whose key prefix is `prefix` (0
    /// when `to` is null; ignored on level 0). The prefix is stored before
    /// the link (contract 9).
    ///
    /// # Safety
    /// As [`Node::link`]; only the writer stores.
    unsafe fn set_next(node: *const Node, level: usize, to: *mut Node, prefix: u64) {
        // SAFETY: caller's contract.
        unsafe {
            if level > 0 {
                (*Node::prefix_slot(node, level)).store(prefix, AtomicOrdering::Relaxed);
            }
            (*Node::link(node, level)).store(to, AtomicOrdering::Release)
        }
    }

    /// The node's key.
    ///
    /// # Safety
    /// `node` points to a published node; the slice lives as long as the list.
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key follows the tower, `key_len` bytes, written before
        // publication and never changed.
        unsafe {
            let n = &*node;
            let at = node.cast::<u8>().add(HEADER + tower_bytes(Node::height(node)));
            std::slice::from_raw_parts(at, n.key_len as usize)
        }
    }

    /// The node's value.
    ///
    /// # Safety
    /// As [`Node::key`].
    unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: as `key`; the value follows the key.
        unsafe {
            let n = &*node;
            let at = node.cast::<u8>().add(HEADER + tower_bytes(Node::height(node)) + n.key_len as usize);
            std::slice::from_raw_parts(at, n.value_len as usize)
        }
    }
}

/// The first node `>= target` from `newest`, the newest node of
/// `target`'s user key `user_key` as the key index names it (contract 5):
/// the key's versions follow it, newest first, so this steps to the first
/// one at or below the target's sequence, or past the last to the next
/// user key's first node (or null).
fn first_at_or_after(list: &SkipList, newest: *const Node, user_key: &[u8], target: &[u8]) -> *const Node {
    let mut x = newest;
    // SAFETY: `x` and the nodes after it are published nodes of this list
    // (contract 3).
    while !x.is_null() {
        let k = unsafe { Node::key(x) };
        if crate::key::user_key(k) != user_key || list.cmp.compare_internal(k, target) != Ordering::Less {
            break;
        }
        x = unsafe { Node::next(x, 0) };
    }
    x
}

thread_local! {
    /// How this thread's recent seeks fared through the memtables' key
    /// indexes ([`Cursor::seek`]), by [`SpliceOdds`]'s rule: a seek to a
    /// key the memtable holds needs no descent, and one to a key it does
    /// not pays an index probe (a likely cache miss) before its descent.
    /// Per thread, so readers never write a shared line.
    static SEEK_ODDS: std::cell::Cell<SpliceOdds> = const { std::cell::Cell::new(SpliceOdds { score: 0, inserts: 0 }) };
}

/// Hints the CPU to load what a comparison with `node` reads: its header,
/// links and key start within its first two cache lines (a hint: any address
/// is safe, null included).
#[inline(always)]
fn prefetch_node(node: *const Node) {
    if !node.is_null() {
        prefetch(node.cast());
        prefetch(node.cast::<u8>().wrapping_add(64));
    }
}

/// Bytes an arena takes in [`BLOCK_BYTES`] heap blocks before it maps
/// [`MAPPED_BLOCK_BYTES`] ones: a memtable of a quiet column family stays small.
const HEAP_ARENA_BYTES: usize = 1 << 20;
/// A mapped arena block.
const MAPPED_BLOCK_BYTES: usize = 2 << 20;

/// One arena block and how it is given back.
enum ArenaBlock {
    /// A zeroed heap block, as the raw pointer its `Box` was turned into.
    Heap(*mut [u64]),
    /// An anonymous private mapping of [`MAPPED_BLOCK_BYTES`], given back
    /// ([`give_back_mapped_block`]) when the list goes.
    Mapped(*mut u8),
}

/// Bump allocation in blocks that never move and are freed with the list.
///
/// The first [`HEAP_ARENA_BYTES`] come from the heap in [`BLOCK_BYTES`]
/// blocks; past them, on Linux, blocks are anonymous mappings of
/// [`MAPPED_BLOCK_BYTES`] of their own. A memtable's memory then never lies
/// in the heap between the block cache's and the compactions' allocations:
/// W5's overwrite, whose flushed memtables' heap blocks stayed resident
/// among them, peaked at 520-590 MB before and 463-493 MB after
/// (docs/benchmarks.md, "Memtables outside the heap"). A freed
/// memtable's mapped blocks are kept for the next memtables up to
/// [`KEPT_BLOCKS`] and unmapped past that. A mapping that fails falls back
/// to a heap block.
struct Arena {
    blocks: Vec<ArenaBlock>,
    /// Free space of the current block.
    next: *mut u8,
    left: usize,
    /// Bytes of heap blocks so far (not counting nodes with blocks of their own).
    heap_bytes: usize,
}

impl Arena {
    fn new() -> Self {
        Arena { blocks: Vec::new(), next: ptr::null_mut(), left: 0, heap_bytes: 0 }
    }

    fn heap_block(&mut self, bytes: usize) -> *mut u8 {
        let words = bytes.div_ceil(8);
        let block: *mut [u64] = Box::into_raw(vec![0u64; words].into_boxed_slice());
        self.blocks.push(ArenaBlock::Heap(block));
        block.cast::<u8>()
    }

    /// A fresh block for small nodes: `(start, bytes)`.
    fn shared_block(&mut self) -> (*mut u8, usize) {
        if self.heap_bytes >= HEAP_ARENA_BYTES {
            if let Some(at) = take_mapped_block() {
                self.blocks.push(ArenaBlock::Mapped(at));
                return (at, MAPPED_BLOCK_BYTES);
            }
        }
        self.heap_bytes += BLOCK_BYTES;
        (self.heap_block(BLOCK_BYTES), BLOCK_BYTES)
    }

    /// `bytes` (a multiple of 8) of zeroed, 8-aligned memory.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        debug_assert_eq!(bytes % 8, 0);
        if bytes > BLOCK_BYTES / 4 {
            return self.heap_block(bytes);
        }
        if bytes > self.left {
            (self.next, self.left) = self.shared_block();
        }
        let at = self.next;
        // SAFETY: `bytes <= left`, so the result stays inside the current block.
        {
            self.next = unsafe { self.next.add(bytes) };
        }
        self.left -= bytes;
        at
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in &self.blocks {
            match *block {
                // SAFETY: each pointer came from `Box::into_raw` in
                // `heap_block` and is freed once, here; no node outlives the
                // list (contract 3: iterators keep their memtable, and so the
                // list, alive).
                ArenaBlock::Heap(b) => drop(unsafe { Box::from_raw(b) }),
                // No node outlives the list (as above): the block is free.
                ArenaBlock::Mapped(at) => give_back_mapped_block(at),
            }
        }
    }
}

/// Mapped blocks of freed memtables, kept (by address) for the next
/// memtables of the process: a block mapped afresh costs a page fault per
/// page on first touch, which on W1's fills cost more than the heap's reuse
/// of a freed memtable's memory did (1 to 12 % of a fill's time); a kept
/// block costs one pass zeroing it. At most [`KEPT_BLOCKS`]; the rest are
/// unmapped.
static KEPT: parking_lot::Mutex<Vec<usize>> = parking_lot::const_mutex(Vec::new());
/// Most blocks [`KEPT`] holds: one default memtable's worth (64 MiB).
const KEPT_BLOCKS: usize = 32;

/// A zeroed mapped block: a kept one, or a new mapping.
fn take_mapped_block() -> Option<*mut u8> {
    let kept = KEPT.lock().pop();
    match kept {
        Some(at) => {
            let at = at as *mut u8;
            // SAFETY: a kept block is a whole mapping of `MAPPED_BLOCK_BYTES`
            // that no arena holds any more (`give_back_mapped_block`), taken
            // out of `KEPT` under its lock by this call only.
            unsafe { ptr::write_bytes(at, 0, MAPPED_BLOCK_BYTES) };
            Some(at)
        }
        None => map_block(),
    }
}

/// A block whose arena is gone: kept for the next memtable, or unmapped when
/// [`KEPT`] is full.
fn give_back_mapped_block(at: *mut u8) {
    let mut kept = KEPT.lock();
    if kept.len() < KEPT_BLOCKS {
        kept.push(at as usize);
        return;
    }
    drop(kept);
    unmap_block(at);
}

/// A zeroed anonymous mapping of [`MAPPED_BLOCK_BYTES`]; `None` when the
/// system refuses it.
#[cfg(target_os = "linux")]
fn map_block() -> Option<*mut u8> {
    // SAFETY: a fresh private anonymous mapping aliases nothing.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            MAPPED_BLOCK_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast::<u8>())
}

#[cfg(not(target_os = "linux"))]
fn map_block() -> Option<*mut u8> {
    None
}

/// Unmaps a block of [`map_block`].
fn unmap_block(at: *mut u8) {
    #[cfg(target_os = "linux")]
    // SAFETY: `at` is a mapping of `MAPPED_BLOCK_BYTES` from `map_block`,
    // unmapped once, when no arena holds it and `KEPT` had no room for it.
    unsafe {
        libc::munmap(at.cast(), MAPPED_BLOCK_BYTES);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = at;
}

/// Most level-0 steps an insert takes from its prefix's hint (contract 7)
/// before it gives up and descends: a descent of a full memtable meets
/// about twenty nodes.
const HINT_WALK: usize = 8;

/// Most steps a seek takes from its prefix's first node (contract 8)
/// before it gives up and descends from the head.
const FIRST_WALK: usize = 16;

/// The length of `user_key`'s prefix under `extractor`, when the key is in
/// its domain and the prefix is the key's start (0 otherwise: no prefix).
pub(crate) fn hint_prefix_len(extractor: &dyn SliceTransform, user_key: &[u8]) -> usize {
    if !extractor.in_domain(user_key) {
        return 0;
    }
    let prefix = extractor.transform(user_key);
    if std::ptr::eq(prefix.as_ptr(), user_key.as_ptr()) && prefix.len() <= user_key.len() {
        prefix.len()
    } else {
        0
    }
}

/// `n` (at least 1) zeroed `T`s straight from the allocator: large tables
/// come as fresh pages the kernel zeroes when first touched, so making a
/// memtable (under the database mutex) costs no pass over them, and slots
/// never used take no memory. Bounded by the callers (at most
/// [`KeyIndex::MAX_SLOTS`] words).
///
/// # Safety
/// All-zero bytes must be a valid `T`.
unsafe fn zeroed_slice<T>(n: usize) -> Box<[T]> {
    let layout = std::alloc::Layout::array::<T>(n).expect("a bounded table");
    // SAFETY: `layout` has a non-zero size (`n >= 1`, and the callers' `T`
    // are not zero-sized); zeroed memory is a valid `[T; n]` (caller's
    // contract); the box frees it with the same layout (`Box<[T]>` of `n`
    // elements), from the global allocator.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<T>();
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// Entries of one bucket of [`PrefixFirsts`]: one cache line.
const FIRSTS_WAYS: usize = 8;

/// A bucket of prefix firsts: each entry 0, or a node pointer (low 48
/// bits) and 16 bits of its prefix's hash (high bits).
#[repr(align(64))]
struct FirstsBucket([AtomicU64; FIRSTS_WAYS]);

/// The first node of each prefix, for readers (contract 8): a table of
/// buckets of [`FIRSTS_WAYS`] entries, a prefix's entry in the bucket its
/// hash picks, beside other prefixes' (a prefix whose bucket is full
/// takes a random entry's place).
struct PrefixFirsts {
    extractor: std::sync::Arc<dyn SliceTransform>,
    buckets: Box<[FirstsBucket]>,
    /// Set before a replace unlinks a node: the table is read no more.
    off: AtomicBool,
}

impl PrefixFirsts {
    /// A table of about `slots` entries, zeroed straight from the allocator
    /// (pages never used take no memory, as the key index's).
    fn new(extractor: std::sync::Arc<dyn SliceTransform>, slots: usize) -> Self {
        let n = slots.div_ceil(FIRSTS_WAYS).clamp(1, KeyIndex::MAX_SLOTS / FIRSTS_WAYS);
        // SAFETY: an all-zero bucket is eight `AtomicU64::new(0)`.
        let buckets = unsafe { zeroed_slice::<FirstsBucket>(n) };
        PrefixFirsts { extractor, buckets, off: AtomicBool::new(false) }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }

    /// The prefix of `user_key`, when it has one that is its start.
    fn prefix_of<'k>(&self, user_key: &'k [u8]) -> Option<&'k [u8]> {
        let n = hint_prefix_len(self.extractor.as_ref(), user_key);
        (n > 0).then(|| &user_key[..n])
    }

    /// The bucket of `prefix` and the tag its entries carry.
    fn bucket_and_tag(&self, prefix: &[u8]) -> (&FirstsBucket, u64) {
        let hash = xxhash_rust::xxh3::xxh3_64(prefix);
        let at = ((u128::from(hash) * self.buckets.len() as u128) >> 64) as usize;
        (&self.buckets[at], (hash & 0xFFFF) << KeyIndex::PTR_BITS)
    }

    /// Records `node` as the first of `prefix`. Writer only: every entry
    /// with the prefix's tag is cleared first (one may hold the prefix's
    /// previous first, which no longer is), then the node takes an empty
    /// entry or, in a full bucket, one chosen by its address.
    fn store(&self, prefix: &[u8], node: *const Node) {
        let (bucket, tag) = self.bucket_and_tag(prefix);
        let mut free = None;
        for (i, e) in bucket.0.iter().enumerate() {
            let v = e.load(AtomicOrdering::Relaxed);
            if v == 0 || v & !KeyIndex::PTR_MASK == tag {
                if v != 0 {
                    e.store(0, AtomicOrdering::Release);
                }
                free = free.or(Some(i));
            }
        }
        let addr = node as u64;
        if addr & !KeyIndex::PTR_MASK != 0 {
            return;
        }
        let i = free.unwrap_or((addr >> 4) as usize % FIRSTS_WAYS);
        bucket.0[i].store(tag | addr, AtomicOrdering::Release);
    }

    /// The node recorded as the first of `prefix`, if any.
    fn load(&self, prefix: &[u8]) -> Option<*const Node> {
        let (bucket, tag) = self.bucket_and_tag(prefix);
        for e in &bucket.0 {
            let v = e.load(AtomicOrdering::Acquire);
            if v != 0 && v & !KeyIndex::PTR_MASK == tag {
                let node = KeyIndex::node(v);
                // SAFETY: an entry holds a published node of this list,
                // stored with `Release` after it was linked (contract 8).
                let key = unsafe { Node::key(node) };
                if self.prefix_of(crate::key::user_key(key)) == Some(prefix) {
                    return Some(node);
                }
            }
        }
        None
    }
}

/// The writer's state, behind the mutex.
struct Writer {
    arena: Arena,
    rng: u64,
    /// Recent inserts' luck at splicing in ([`SkipList::insert_before_newest`]).
    splice_odds: SpliceOdds,
    /// Per slot (a hash of a key prefix), the node last inserted with a
    /// prefix of that hash, or 0 (contract 7); empty: no hints.
    hints: Box<[usize]>,
    /// Recent inserts' luck at landing near their hint.
    hint_odds: SpliceOdds,
    /// Inserts spliced in before their key's newest node (tests).
    #[cfg(test)]
    spliced: usize,
    /// Inserts linked in near their prefix's hint (tests).
    #[cfg(test)]
    hinted: usize,
}

/// Whether an insert tries to splice in before its key's newest node. The
/// try reads the key's index slot at once, a cache miss that a descent would
/// have overlapped with its own, and is lost when the key is new (a fill);
/// a splice saves a whole descent. So a list tries while its recent tries
/// succeed at least about one time in nine (each success counts 8, each
/// failure -1), and otherwise tries one insert in 16, which keeps the
/// score current.
#[derive(Clone, Copy)]
struct SpliceOdds {
    score: i32,
    inserts: u32,
}

impl SpliceOdds {
    const LIMIT: i32 = 64;

    fn worth_trying(&mut self) -> bool {
        self.inserts = self.inserts.wrapping_add(1);
        self.score > -Self::LIMIT / 2 || self.inserts.is_multiple_of(16)
    }

    fn record(&mut self, spliced: bool) {
        let change = if spliced { 8 } else { -1 };
        self.score = (self.score + change).clamp(-Self::LIMIT, Self::LIMIT);
    }
}

/// A hash index from user key to the key's newest node (contract 5): open
/// addressing with linear probing over slots that each hold a node pointer
/// (low 48 bits) and 16 bits of the key's hash (high bits), 0 when empty.
/// Its capacity is fixed when it is made; once three quarters of the slots
/// are used it is *saturated*: keys new to it are no longer indexed, so a
/// key it does not hold may still be in the list.
struct KeyIndex {
    slots: Box<[AtomicU64]>,
    /// Slots in use (changed by the writer only).
    used: AtomicUsize,
    /// Most slots in use before the table saturates.
    limit: usize,
    saturated: AtomicBool,
}

/// A list's key index in tiers (contract 5): a small table first, and each
/// next one, [`INDEX_TIER_GROWTH`] times larger up to the memtable's whole
/// index, made when the one before fills: the writer copies every key the
/// full tier holds into it before readers see it, so the newest tier holds
/// every key indexed and a lookup probes it alone. The index's memory then
/// follows the keys the memtable holds: a memtable flushed early (a quiet
/// column family, a shared memtable budget that flushes a family at a
/// fraction of its `write_buffer_size`) never makes, zeroes and charges the
/// tiers it would not fill. The older tiers stay until the list goes (a
/// reader may still be probing one): see [`KeyIndexes::new`] for what they
/// add.
struct KeyIndexes {
    /// The tiers, oldest first; the first made with the list.
    tiers: [std::sync::OnceLock<KeyIndex>; MAX_INDEX_TIERS],
    /// Slots and load percent of each tier; 0 slots: no such tier.
    shapes: [(usize, usize); MAX_INDEX_TIERS],
    /// Set when a key could not be indexed (a node address the slots cannot
    /// hold): a key no tier holds may then be in the list.
    lost: AtomicBool,
}

/// Slots of a key index's first tier (32 KiB).
const SMALL_INDEX_SLOTS: usize = 4096;
/// Each tier's slots over the one's before it.
const INDEX_TIER_GROWTH: usize = 8;
/// Most tiers: 4,096 slots times 8 to the fourth is past
/// [`KeyIndex::MAX_SLOTS`], so a fifth tier is the last.
const MAX_INDEX_TIERS: usize = 5;
/// Percent of its slots a tier before the last fills before the next is
/// made: half, so that its probes meet short runs (about 2.5 slots on a
/// miss where three quarters would give 8.5).
const SMALL_INDEX_LOAD: usize = 50;
/// Percent of its slots the last tier (the memtable's whole index) fills.
const LARGE_INDEX_LOAD: usize = 75;

/// How an insert into one table went.
enum Inserted {
    /// Indexed, replaced, or left out for good (the table saturated).
    Done,
    /// The key is new and the table is at its limit (now saturated).
    Full,
    /// The node's address does not fit a slot: the key is not indexed.
    Lost,
}

impl KeyIndexes {
    /// Tiers for an index of `slots` slots in its last: the first of at
    /// most [`SMALL_INDEX_SLOTS`], each next [`INDEX_TIER_GROWTH`] times
    /// larger while that leaves the last at least twice its size, the last
    /// of `slots`. The tiers before the last so add at most 4/7 of it, a
    /// seventh where the last is 8 times the one before.
    fn new(slots: usize) -> Self {
        let slots = slots.min(KeyIndex::MAX_SLOTS);
        let mut shapes = [(0, 0); MAX_INDEX_TIERS];
        let mut size = slots.min(SMALL_INDEX_SLOTS);
        for shape in shapes.iter_mut() {
            let last = size >= slots;
            *shape = (size, if last { LARGE_INDEX_LOAD } else { SMALL_INDEX_LOAD });
            if last {
                break;
            }
            // A tier that would leave the last under twice its size is
            // skipped: the last is made instead.
            size = match size.saturating_mul(INDEX_TIER_GROWTH) {
                next if next.saturating_mul(2) > slots => slots,
                next => next,
            };
        }
        debug_assert!(shapes.iter().any(|&(n, _)| n == slots), "tiers up to {slots} slots: {shapes:?}");
        Self::with_shapes(shapes)
    }

    /// Tiers of given sizes (tests: a small first tier that fills).
    #[cfg(test)]
    fn with_tiers(small: usize, large: usize) -> Self {
        let mut shapes = [(0, 0); MAX_INDEX_TIERS];
        shapes[0] = (small, SMALL_INDEX_LOAD);
        shapes[1] = (large, LARGE_INDEX_LOAD);
        Self::with_shapes(shapes)
    }

    fn with_shapes(shapes: [(usize, usize); MAX_INDEX_TIERS]) -> Self {
        let tiers: [std::sync::OnceLock<KeyIndex>; MAX_INDEX_TIERS] = Default::default();
        let _ = tiers[0].set(KeyIndex::new(shapes[0].0, shapes[0].1));
        KeyIndexes { tiers, shapes, lost: AtomicBool::new(false) }
    }

    /// The tiers made so far, oldest first (they are made in order).
    fn made(&self) -> &[std::sync::OnceLock<KeyIndex>] {
        let n = self.tiers.iter().take_while(|t| t.get().is_some()).count();
        &self.tiers[..n]
    }

    fn bytes(&self) -> usize {
        self.made().iter().filter_map(std::sync::OnceLock::get).map(KeyIndex::bytes).sum()
    }

    /// The tier new keys go to, and its place.
    fn current(&self) -> (usize, &KeyIndex) {
        let made = self.made();
        let at = made.len() - 1;
        (at, made[at].get().expect("a made tier"))
    }

    fn prefetch(&self, user_key: &[u8]) -> u64 {
        self.current().1.prefetch(user_key)
    }

    /// Writer only.
    fn insert(&self, node: *const Node, key: &[u8], hash: u64) {
        let (mut at, mut tier) = self.current();
        loop {
            match tier.insert(node, key, hash) {
                Inserted::Done => return,
                Inserted::Lost => {
                    self.lost.store(true, AtomicOrdering::Release);
                    return;
                }
                Inserted::Full => {
                    // The next tier takes every key the full one holds, each
                    // at its newest version, before readers see it (the
                    // `OnceLock` publishes it made), then this key and the
                    // ones after. With none left, the key is not indexed
                    // (this tier is saturated: lookups of keys it lacks
                    // descend).
                    let Some(&(slots, load)) = self.shapes.get(at + 1).filter(|s| s.0 > 0) else { return };
                    let full = tier;
                    at += 1;
                    tier = self.tiers[at].get_or_init(|| {
                        let next = KeyIndex::new(slots, load);
                        if !next.take_all(full) {
                            self.lost.store(true, AtomicOrdering::Release);
                        }
                        next
                    });
                }
            }
        }
    }

    fn lookup(&self, user_key: &[u8]) -> Indexed {
        self.lookup_hashed(user_key, xxhash_rust::xxh3::xxh3_64(user_key))
    }

    /// [`KeyIndexes::lookup`] with the key's hash known: one probe of the
    /// newest tier, which holds every key indexed.
    fn lookup_hashed(&self, user_key: &[u8], hash: u64) -> Indexed {
        if self.lost.load(AtomicOrdering::Acquire) {
            return Indexed::Unknown;
        }
        self.current().1.lookup(user_key, hash)
    }
}

/// What the key index knows of a user key.
enum Indexed {
    /// The key's newest node.
    Newest(*const Node),
    /// The list holds no version of the key.
    Absent,
    /// The index cannot tell (saturated, or not indexed): search.
    Unknown,
}

impl KeyIndex {
    const PTR_BITS: u32 = 48;
    const PTR_MASK: u64 = (1 << Self::PTR_BITS) - 1;

    /// Most slots an index gets (64 MiB, for write buffers to 768 MiB; a
    /// larger memtable's index saturates before the memtable fills).
    const MAX_SLOTS: usize = 8 << 20;

    /// A table of `slots` slots (bounded) that saturates once
    /// `max_load_percent` of them are used.
    fn new(slots: usize, max_load_percent: usize) -> Self {
        let n = slots.clamp(16, Self::MAX_SLOTS);
        // SAFETY: an all-zero `AtomicU64` is `AtomicU64::new(0)`.
        let slots = unsafe { zeroed_slice::<AtomicU64>(n) };
        KeyIndex {
            limit: n * max_load_percent / 100,
            slots,
            used: AtomicUsize::new(0),
            saturated: AtomicBool::new(false),
        }
    }

    fn bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// The node a used slot's value points to.
    fn node(v: u64) -> *const Node {
        (v & Self::PTR_MASK) as *const Node
    }

    /// The first slot to probe for `hash` (Lemire's multiply-shift range
    /// reduction: any table size) and the tag stored beside the pointer.
    fn start_and_tag(&self, hash: u64) -> (usize, u64) {
        let start = ((u128::from(hash) * self.slots.len() as u128) >> 64) as usize;
        (start, (hash & 0xFFFF) << Self::PTR_BITS)
    }

    /// The slot holding `user_key` (its node's user key equal), or the
    /// empty slot ending its probe, or None when the probe found neither
    /// within the table.
    fn probe(&self, user_key: &[u8], hash: u64) -> Option<(usize, u64)> {
        let (start, tag) = self.start_and_tag(hash);
        let n = self.slots.len();
        for i in 0..n {
            let at = if start + i < n { start + i } else { start + i - n };
            let v = self.slots[at].load(AtomicOrdering::Acquire);
            if v == 0 {
                return Some((at, 0));
            }
            if v & !Self::PTR_MASK == tag {
                let node = Self::node(v);
                // SAFETY: a slot's pointer is to a node of this list,
                // published before the slot was stored (contract 5).
                if crate::key::user_key(unsafe { Node::key(node) }) == user_key {
                    return Some((at, v));
                }
            }
        }
        None
    }

    fn lookup(&self, user_key: &[u8], hash: u64) -> Indexed {
        match self.probe(user_key, hash) {
            Some((_, 0)) if !self.saturated.load(AtomicOrdering::Acquire) => Indexed::Absent,
            Some((_, v)) if v != 0 => Indexed::Newest(Self::node(v)),
            _ => Indexed::Unknown,
        }
    }

    /// The hash of `user_key`, its first slot's load issued.
    fn prefetch(&self, user_key: &[u8]) -> u64 {
        let hash = xxhash_rust::xxh3::xxh3_64(user_key);
        prefetch(self.slots[self.start_and_tag(hash).0].as_ptr().cast_const().cast());
        hash
    }

    /// Records `node` (just linked, key `key`, whose user key hashes to
    /// `hash`) as its user key's newest unless a newer version is
    /// recorded. Writer only.
    fn insert(&self, node: *const Node, key: &[u8], hash: u64) -> Inserted {
        let addr = node as u64;
        if addr & !Self::PTR_MASK != 0 {
            // A pointer this index cannot hold: stop answering for absent
            // keys rather than miss this one (the tiers stop too).
            self.saturated.store(true, AtomicOrdering::Release);
            return Inserted::Lost;
        }
        let user_key = crate::key::user_key(key);
        let (_, tag) = self.start_and_tag(hash);
        match self.probe(user_key, hash) {
            Some((at, 0)) => {
                let used = self.used.load(AtomicOrdering::Relaxed);
                if used + 1 > self.limit {
                    self.saturated.store(true, AtomicOrdering::Release);
                    return Inserted::Full;
                }
                self.used.store(used + 1, AtomicOrdering::Relaxed);
                self.slots[at].store(tag | addr, AtomicOrdering::Release);
            }
            Some((at, v)) => {
                // SAFETY: as in `probe`.
                let old = unsafe { Node::key(Self::node(v)) };
                if trailer(key) >> 8 >= trailer(old) >> 8 {
                    self.slots[at].store(tag | addr, AtomicOrdering::Release);
                }
            }
            None => {
                self.saturated.store(true, AtomicOrdering::Release);
                return Inserted::Full;
            }
        }
        Inserted::Done
    }

    /// Indexes every key `from` holds, at the node it names (writer only,
    /// into a table no reader sees yet); false when one could not be.
    fn take_all(&self, from: &KeyIndex) -> bool {
        for slot in from.slots.iter() {
            let v = slot.load(AtomicOrdering::Acquire);
            if v == 0 {
                continue;
            }
            let node = Self::node(v);
            // SAFETY: a slot's pointer is to a published node of this list
            // (contract 5).
            let key = unsafe { Node::key(node) };
            let hash = xxhash_rust::xxh3::xxh3_64(crate::key::user_key(key));
            if !matches!(self.insert(node, key, hash), Inserted::Done) {
                return false;
            }
        }
        true
    }
}

/// A sorted set of (internal key, value) entries; see the module contract.
pub struct SkipList {
    head: NonNull<Node>,
    /// Height of the tallest tower linked so far (readers may see it before
    /// the links: the head's links at the new levels are null, which reads as
    /// "nothing there", as in LevelDB).
    max_height: AtomicUsize,
    writer: Mutex<Writer>,
    /// Each user key's newest node, for point lookups (contract 5).
    index: Option<KeyIndexes>,
    /// Bytes of all nodes (contract 4).
    bytes: AtomicUsize,
    /// Bytes of the prefix hints and firsts (contracts 7 and 8).
    hint_bytes: AtomicUsize,
    /// Each prefix's first node, for seeks (contract 8).
    firsts: Option<PrefixFirsts>,
    /// The order of the keys (contract 1).
    cmp: UserComparator,
}

// SAFETY: the raw pointers are into the arena the list owns. Nodes are written
// only by the writer, under `writer`, before a `Release` store publishes them;
// afterwards only their atomic links change (contract 3). So the list can move
// to and be shared between threads like the `Vec`s and atomics it is made of.
unsafe impl Send for SkipList {}
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list whose keys are in `cmp`'s internal order, without
    /// the key index, prefix hints or prefix firsts.
    pub fn new(cmp: UserComparator) -> Self {
        let mut arena = Arena::new();
        let size = Node::size(MAX_HEIGHT, 0, 0);
        let head = arena.alloc(size).cast::<Node>();
        // SAFETY: `head` is fresh, zeroed, aligned memory of the node's size:
        // zeroed links are null pointers.
        unsafe {
            (*head).meta = AtomicU64::new(MAX_HEIGHT as u64);
        }
        SkipList {
            head: NonNull::new(head).expect("arena blocks are never null"),
            max_height: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                arena,
                rng: 0x9E37_79B9_7F4A_7C15,
                splice_odds: SpliceOdds { score: 0, inserts: 0 },
                hints: Box::default(),
                hint_odds: SpliceOdds { score: 0, inserts: 0 },
                #[cfg(test)]
                spliced: 0,
                #[cfg(test)]
                hinted: 0,
            }),
            index: None,
            bytes: AtomicUsize::new(0),
            hint_bytes: AtomicUsize::new(0),
            firsts: None,
            cmp,
        }
    }

    /// A list with a key index of `slots` slots (contract 5) when its
    /// order's key equality is byte equality (the built-in orders); a user
    /// comparator may call different bytes equal, and gets none.
    pub(crate) fn with_key_index(cmp: UserComparator, slots: usize) -> Self {
        let indexed = slots > 0 && (cmp.is_bytewise() || cmp.is_reverse_bytewise());
        let mut list = SkipList::new(cmp);
        if indexed {
            list.index = Some(KeyIndexes::new(slots));
        }
        list
    }

    /// A list with a key index in tiers of the given sizes (tests).
    #[cfg(test)]
    fn with_index_tiers(cmp: UserComparator, small: usize, large: usize) -> Self {
        let mut list = SkipList::new(cmp);
        list.index = Some(KeyIndexes::with_tiers(small, large));
        list
    }

    /// The list with a table of `slots` prefix hints (contract 7; none
    /// when 0).
    pub(crate) fn with_prefix_hints(self, slots: usize) -> Self {
        self.writer.lock().hints = vec![0usize; slots].into_boxed_slice();
        self.hint_bytes.store(slots * std::mem::size_of::<usize>(), AtomicOrdering::Relaxed);
        self
    }

    /// The list with a table of `slots` prefix firsts for `extractor`'s
    /// prefixes (contract 8), when its order is a built-in one (a user
    /// comparator need not keep a prefix's keys together) and `slots > 0`.
    pub(crate) fn with_prefix_firsts(mut self, extractor: std::sync::Arc<dyn SliceTransform>, slots: usize) -> Self {
        if slots == 0 || !(self.cmp.is_bytewise() || self.cmp.is_reverse_bytewise()) {
            return self;
        }
        let firsts = PrefixFirsts::new(extractor, slots);
        self.hint_bytes.fetch_add(firsts.bytes(), AtomicOrdering::Relaxed);
        self.firsts = Some(firsts);
        self
    }

    /// Records `node`, just linked after `pred` (the head or a node), as
    /// its prefix's first when it is (contract 8). Writer only.
    fn note_first(&self, node: *const Node, pred: *const Node) {
        let Some(firsts) = &self.firsts else { return };
        // SAFETY: `node` is a published node of this list, `pred` the head
        // or one; the head's key is empty and never read here.
        unsafe {
            let Some(prefix) = firsts.prefix_of(crate::key::user_key(Node::key(node))) else { return };
            let first =
                ptr::eq(pred, self.head()) || firsts.prefix_of(crate::key::user_key(Node::key(pred))) != Some(prefix);
            if first {
                firsts.store(prefix, node);
            }
        }
    }

    /// The first node `>= key` found from the first node of `key`'s prefix
    /// (contract 8), or `None` when the table cannot tell: no table, no
    /// prefix, a slot holding another prefix's node, or a walk longer than
    /// [`FIRST_WALK`].
    fn seek_from_first(&self, key: &[u8]) -> Option<*const Node> {
        let firsts = self.firsts.as_ref()?;
        if firsts.off.load(AtomicOrdering::Acquire) {
            return None;
        }
        let prefix = firsts.prefix_of(crate::key::user_key(key))?;
        let first = firsts.load(prefix)?;
        // SAFETY: `first` is a published node of this list; nodes live as
        // long as the list, and links from one lead to published nodes
        // (contract 3).
        unsafe {
            let first_key = Node::key(first);
            if self.cmp.compare_internal(key, first_key) != Ordering::Greater {
                // Nothing lies between the target and its prefix's first.
                return Some(first);
            }
            // Descend from `first`'s own tower: it is below the target.
            let mut x = first;
            let mut level = Node::height(first) - 1;
            let mut steps = 0;
            loop {
                let next = Node::next(x, level);
                if !next.is_null() && self.cmp.compare_internal(Node::key(next), key) == Ordering::Less {
                    steps += 1;
                    if steps > FIRST_WALK {
                        return None;
                    }
                    x = next;
                } else if level == 0 {
                    return Some(next);
                } else {
                    level -= 1;
                }
            }
        }
    }

    /// Bytes of the key index (its first tier from the start, its second
    /// once made) and of the prefix hints.
    pub(crate) fn index_bytes(&self) -> usize {
        self.index.as_ref().map_or(0, KeyIndexes::bytes) + self.hint_bytes.load(AtomicOrdering::Relaxed)
    }

    /// The order of the keys.
    pub(crate) fn comparator(&self) -> &UserComparator {
        &self.cmp
    }

    fn head(&self) -> *const Node {
        self.head.as_ptr()
    }

    /// Bytes of all nodes inserted (contract 4).
    pub(crate) fn memory_usage(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        // SAFETY: the head is a node of this list of height MAX_HEIGHT.
        unsafe { Node::next(self.head(), 0).is_null() }
    }

    /// Inserts `(key, value)`, replacing an entry with an equal key (tests:
    /// the memtable gives every insert its prefix).
    #[cfg(test)]
    pub(crate) fn insert(&self, key: &[u8], value: &[u8]) {
        self.insert_with_prefix(key, value, 0);
    }

    /// Inserts `(key, value)`, replacing an entry with an equal key
    /// (contract 1), where `key`'s user key starts with a prefix of
    /// `prefix_len` bytes (0: none), the key of its hint (contract 7).
    pub(crate) fn insert_with_prefix(&self, key: &[u8], value: &[u8], prefix_len: usize) {
        let mut w = self.writer.lock();
        // The key's index slot loads while the list is descended.
        let hash = self.index.as_ref().map(|index| index.prefetch(crate::key::user_key(key)));
        let hint = match crate::key::user_key(key).get(..prefix_len) {
            Some(prefix) if prefix_len > 0 && !w.hints.is_empty() => {
                let slot = hint_slot(prefix, w.hints.len());
                prefetch(ptr::addr_of!(w.hints[slot]).cast());
                Some(slot)
            }
            _ => None,
        };
        let new_height = random_height(&mut w.rng);
        if new_height == 1 {
            let mut linked = None;
            if let (Some(index), Some(hash)) = (&self.index, hash) {
                if w.splice_odds.worth_trying() {
                    linked = self.insert_before_newest(&mut w, index, hash, key, value);
                    w.splice_odds.record(linked.is_some());
                }
            }
            if let (None, Some(slot)) = (linked, hint) {
                if w.hint_odds.worth_trying() {
                    linked = self.insert_near_hint(&mut w, slot, prefix_len, hash, key, value);
                    w.hint_odds.record(linked.is_some());
                }
            }
            if let Some(node) = linked {
                if let Some(slot) = hint {
                    w.hints[slot] = node as usize;
                }
                return;
            }
        }
        let mut prev = [self.head(); MAX_HEIGHT];
        let height = self.max_height.load(AtomicOrdering::Relaxed);
        // Only this writer changes the height, so the descent sees `height`.
        let (_, old) = self.descend(key, |level, x| prev[level] = x);
        if new_height > height {
            // Readers that see the new height before the links find null
            // links on the head at those levels, and go down.
            self.max_height.store(new_height, AtomicOrdering::Relaxed);
        }
        // SAFETY (`old`, here and below): null or a node of this list.
        let replaced = !old.is_null() && self.cmp.compare_internal(unsafe { Node::key(old) }, key) == Ordering::Equal;
        let old_height = if replaced { unsafe { Node::height(old) } } else { 0 };
        if let (true, Some(firsts)) = (replaced, &self.firsts) {
            // A slot may hold the node about to leave the list (contract 8).
            firsts.off.store(true, AtomicOrdering::SeqCst);
        }

        let (node, size) = Self::new_node(&mut w, new_height, key, value);
        // SAFETY: `node` is whole, with a tower of `new_height` links, and
        // nothing else can see it until it is linked below.
        unsafe {
            for (level, &p) in prev.iter().enumerate().take(new_height) {
                let from = if level < old_height { old } else { p };
                Node::set_next(node, level, Node::next(from, level), Node::next_prefix(from, level));
            }
            // Publish bottom-up (a reader may find the node at level 0 before
            // the upper levels, which only makes its search longer); where the
            // replaced node stood above the new one's height, unlink it.
            let prefix = key_prefix(key);
            for (level, &p) in prev.iter().enumerate().take(new_height.max(old_height)) {
                if level < new_height {
                    Node::set_next(p, level, node, prefix);
                } else {
                    Node::set_next(p, level, Node::next(old, level), Node::next_prefix(old, level));
                }
            }
            // The level-0 back links: the node's predecessor, and the node as
            // its successor's.
            Node::set_prev(node, prev[0]);
            let next = Node::next(node, 0);
            if !next.is_null() {
                Node::set_prev(next, node);
            }
        }
        self.note_first(node, prev[0]);
        if let (Some(index), Some(hash)) = (&self.index, hash) {
            index.insert(node, key, hash);
        }
        if let Some(slot) = hint {
            w.hints[slot] = node as usize;
        }
        self.bytes.fetch_add(size, AtomicOrdering::Relaxed);
    }

    /// A node of `height` holding `key` and `value`, its links null, in
    /// `w`'s arena, and its size; nothing else can see it until it is linked.
    fn new_node(w: &mut Writer, height: usize, key: &[u8], value: &[u8]) -> (*mut Node, usize) {
        let size = Node::size(height, key.len(), value.len());
        let node = w.arena.alloc(size).cast::<Node>();
        // SAFETY: `node` is fresh, zeroed, 8-aligned memory of `size` bytes,
        // which hold the header, a tower of `height` links (zeroed: null),
        // the key and the value.
        unsafe {
            (*node).key_len = u32::try_from(key.len()).expect("memtable keys are under 4 GiB");
            (*node).value_len = u32::try_from(value.len()).expect("memtable values are under 4 GiB");
            (*node).meta = AtomicU64::new(height as u64);
            let data = node.cast::<u8>().add(HEADER + tower_bytes(height));
            ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        (node, size)
    }

    /// Inserts `(key, value)` as a tower of height 1 right before the newest
    /// node of its user key, which the key index names, when that is where
    /// it belongs: a new version of a key the list holds (merge operands,
    /// overwrites) then needs no descent, only the newest node and its
    /// recorded predecessor. The splice is checked, not trusted: the
    /// predecessor must link to that node, and the key must fall strictly
    /// between the two; otherwise nothing changes and `None` is returned
    /// (the caller descends). Writer only, under `w`.
    fn insert_before_newest(
        &self,
        w: &mut Writer,
        index: &KeyIndexes,
        hash: u64,
        key: &[u8],
        value: &[u8],
    ) -> Option<*const Node> {
        let Indexed::Newest(newest) = index.lookup_hashed(crate::key::user_key(key), hash) else { return None };
        // SAFETY: a slot's pointer is to a published node of this list
        // (contract 5); a recorded predecessor is the head or a node of this
        // list (`set_prev`).
        let p = unsafe { Node::prev(newest) };
        let node = self.link_between(w, p, newest, key, value, Some(hash))?;
        #[cfg(test)]
        {
            w.spliced += 1;
        }
        Some(node)
    }

    /// Inserts `(key, value)` as a tower of height 1 near the node hinted
    /// for its prefix in `slot` (contract 7), `prefix_len` bytes of its user
    /// key: walks level 0 from the hint (forward through links, back through
    /// recorded predecessors) at most [`HINT_WALK`] steps to the nodes the
    /// key falls between, and links it there, checked as
    /// [`SkipList::insert_before_newest`] does. `None` (nothing changed)
    /// when the slot is empty or holds another prefix's node, the hint left
    /// the list (a replace unlinked it), the walk is longer, or the list
    /// holds an equal key. Writer only, under `w`.
    fn insert_near_hint(
        &self,
        w: &mut Writer,
        slot: usize,
        prefix_len: usize,
        hash: Option<u64>,
        key: &[u8],
        value: &[u8],
    ) -> Option<*const Node> {
        let hint = w.hints[slot] as *const Node;
        if hint.is_null() {
            return None;
        }
        let head = self.head();
        // SAFETY: a hint is a node this writer linked into this list (nodes
        // live as long as the list); a recorded predecessor is null, the
        // head or a node of this list, and only this writer changes links
        // and predecessors, so the walk reads nodes of this list.
        let (p, n) = unsafe {
            let hint_key = Node::key(hint);
            if crate::key::user_key(hint_key).get(..prefix_len) != crate::key::user_key(key).get(..prefix_len) {
                return None;
            }
            // A replaced node keeps its predecessor, which links past it.
            let hp = Node::prev(hint);
            if hp.is_null() || !ptr::eq(Node::next(hp, 0), hint) {
                return None;
            }
            match self.cmp.compare_internal(hint_key, key) {
                Ordering::Equal => return None,
                Ordering::Less => {
                    let mut p = hint;
                    let mut steps = 0;
                    loop {
                        let n = Node::next(p, 0);
                        if n.is_null() || self.cmp.compare_internal(key, Node::key(n)) == Ordering::Less {
                            break (p, n.cast_const());
                        }
                        steps += 1;
                        if steps == HINT_WALK {
                            return None;
                        }
                        p = n;
                    }
                }
                Ordering::Greater => {
                    let mut n = hint;
                    let mut steps = 0;
                    loop {
                        let p = Node::prev(n);
                        if p.is_null() {
                            return None;
                        }
                        if ptr::eq(p, head) || self.cmp.compare_internal(Node::key(p), key) == Ordering::Less {
                            break (p, n);
                        }
                        steps += 1;
                        if steps == HINT_WALK {
                            return None;
                        }
                        n = p;
                    }
                }
            }
        };
        let node = self.link_between(w, p, n, key, value, hash)?;
        #[cfg(test)]
        {
            w.hinted += 1;
        }
        Some(node)
    }

    /// Links `(key, value)` as a tower of height 1 between `p` and `n` (null:
    /// the end of the list) when `p` links to `n` at level 0 and the key
    /// falls strictly between them (`p` the head, or below the key; `n`
    /// null, or above it); `None`, changing nothing, otherwise. Counts the
    /// node's bytes, and indexes it under the key's `hash` (as
    /// [`KeyIndexes::prefetch`] gave it) when the list has a key index.
    /// Writer only, under `w`.
    fn link_between(
        &self,
        w: &mut Writer,
        p: *const Node,
        n: *const Node,
        key: &[u8],
        value: &[u8],
        hash: Option<u64>,
    ) -> Option<*const Node> {
        // SAFETY: `p` is null, the head or a node of this list, `n` null or
        // a node of this list (callers' contract); each is read only when
        // not null, and only this writer changes links.
        let fits = unsafe {
            !p.is_null()
                && ptr::eq(Node::next(p, 0), n)
                && (n.is_null() || self.cmp.compare_internal(key, Node::key(n)) == Ordering::Less)
                && (ptr::eq(p, self.head()) || self.cmp.compare_internal(Node::key(p), key) == Ordering::Less)
        };
        if !fits {
            return None;
        }
        let (node, size) = Self::new_node(w, 1, key, value);
        // SAFETY: `node` is whole, with one link; it is published by the
        // predecessor's `Release` store after its own link is set.
        unsafe {
            Node::set_next(node, 0, n.cast_mut(), 0);
            Node::set_next(p, 0, node, 0);
            Node::set_prev(node, p);
            if !n.is_null() {
                Node::set_prev(n, node);
            }
        }
        self.note_first(node, p);
        if let (Some(index), Some(hash)) = (&self.index, hash) {
            index.insert(node, key, hash);
        }
        self.bytes.fetch_add(size, AtomicOrdering::Relaxed);
        Some(node)
    }

    /// The last node `< key` (the head if none) and the first node `>= key`
    /// (null if none): LevelDB's `FindGreaterOrEqual` and `FindLessThan` in
    /// one descent. `at_level(level, x)` hears of the last node `< key` on
    /// each level, top down (an insert's splice).
    fn descend(&self, key: &[u8], mut at_level: impl FnMut(usize, *const Node)) -> (*const Node, *const Node) {
        let mut x = self.head();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        // The last node found `>= key`: met again one level down (towers
        // link the same node at every level), it is not compared again
        // (RocksDB's `last_bigger`).
        let mut last_bigger: *const Node = ptr::null();
        // Only the bytewise order goes down on key prefixes (contract 9).
        let prefix = self.cmp.is_bytewise().then(|| key_prefix(key));
        loop {
            // SAFETY (here and below): `x` is the head or a node reached
            // through links below its height; every level <= `level` exists
            // on `x` because the descent starts at the top and only moves
            // right on one level.
            if let Some(prefix) = prefix {
                if level > 0 && prefix < unsafe { Node::next_prefix(x, level) } {
                    // The next node is above the key (contract 9): down,
                    // without loading it.
                    at_level(level, x);
                    level -= 1;
                    continue;
                }
            }
            let next = unsafe { Node::next(x, level) };
            if !next.is_null() {
                // The link the next step reads if `next` is passed (RocksDB's
                // `FindGreaterOrEqual` prefetches it too): its cache miss
                // overlaps the comparison with `next`'s key.
                // SAFETY: `next` is a published node of height > `level`.
                prefetch(unsafe { Node::link(next, level) }.cast());
            }
            let before = !next.is_null()
                && !ptr::eq(next, last_bigger)
                && self.cmp.compare_internal(unsafe { Node::key(next) }, key) == Ordering::Less;
            if before {
                x = next;
            } else {
                last_bigger = next;
                at_level(level, x);
                if level == 0 {
                    return (x, next);
                }
                level -= 1;
            }
        }
    }

    /// Brings into the cache the nodes that descents to `keys` (internal
    /// keys) compare against, so that inserting them next finds its path
    /// cached. The descents run in lockstep: each step of one descent issues
    /// the loads its next comparison needs, and the other descents take
    /// their steps while those loads are in flight, so up to `keys.len()`
    /// cache misses overlap where an insert alone waits for one at a time
    /// (group prefetching). A descent of a large list misses the cache on
    /// most of its lower levels; this is most of an insert's time. Reads
    /// only: the list is unchanged, and a key's insert is correct whatever
    /// this did.
    ///
    /// A key whose newest version the key index names is not descended: its
    /// insert is most likely a splice before that node
    /// ([`SkipList::insert_before_newest`]), which reads that node alone, and
    /// the node is prefetched instead (overwrites of a few hot keys would
    /// otherwise pay a whole descent twice).
    pub(crate) fn warm(&self, keys: &[&[u8]]) {
        let keys = &keys[..keys.len().min(WARM_LANES)];
        let Some(index) = &self.index else {
            self.descend_together(keys);
            return;
        };
        let mut hashes = [0u64; WARM_LANES];
        for (hash, key) in hashes.iter_mut().zip(keys) {
            *hash = index.prefetch(crate::key::user_key(key));
        }
        let mut descend: [&[u8]; WARM_LANES] = [&[]; WARM_LANES];
        let mut n = 0;
        for (&hash, &key) in hashes.iter().zip(keys) {
            match index.lookup_hashed(crate::key::user_key(key), hash) {
                Indexed::Newest(node) => prefetch_node(node),
                Indexed::Absent | Indexed::Unknown => {
                    descend[n] = key;
                    n += 1;
                }
            }
        }
        if n > 0 {
            self.descend_together(&descend[..n]);
        }
    }

    /// The descents of [`SkipList::warm`]; for each key (up to
    /// [`WARM_LANES`]), the last node `< key` (the head if none), where its
    /// descent ended: what [`SkipList::find_less_than`] finds, so the nodes
    /// warmed are those an insert compares against.
    fn descend_together(&self, keys: &[&[u8]]) -> [*const Node; WARM_LANES] {
        /// One descent: at `x` on `level`, about to compare `pending`
        /// (`x`'s successor there, its loads issued), or finished.
        #[derive(Clone, Copy)]
        struct Lane {
            x: *const Node,
            pending: *const Node,
            level: usize,
            done: bool,
        }
        let keys = &keys[..keys.len().min(WARM_LANES)];
        let top = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        // SAFETY: the head has every level.
        let first = unsafe { Node::next(self.head(), top) };
        prefetch_node(first);
        let mut lanes = [Lane { x: self.head(), pending: first, level: top, done: false }; WARM_LANES];
        let mut active = keys.len();
        while active > 0 {
            for (lane, key) in lanes.iter_mut().zip(keys) {
                if lane.done {
                    continue;
                }
                // SAFETY: as in `descend`: `pending` is null or a published
                // node of height > `level`, reached through a link on it.
                let before = !lane.pending.is_null()
                    && self.cmp.compare_internal(unsafe { Node::key(lane.pending) }, key) == Ordering::Less;
                if before {
                    lane.x = lane.pending;
                } else if lane.level == 0 {
                    lane.done = true;
                    active -= 1;
                    continue;
                } else {
                    lane.level -= 1;
                }
                // SAFETY: `x` is the head or a node reached on `level` or
                // above, so it has `level`.
                lane.pending = unsafe { Node::next(lane.x, lane.level) };
                prefetch_node(lane.pending);
            }
        }
        lanes.map(|l| l.x)
    }

    /// [`SkipList::descend`] without the splice.
    fn search(&self, key: &[u8]) -> (*const Node, *const Node) {
        self.descend(key, |_, _| {})
    }

    /// The first node `>= key`, or null: from its prefix's first node
    /// when the list keeps them (contract 8), else by a descent.
    fn find_greater_or_equal(&self, key: &[u8]) -> *const Node {
        self.seek_from_first(key).unwrap_or_else(|| self.search(key).1)
    }

    /// The last node `< key`, or the head.
    fn find_less_than(&self, key: &[u8]) -> *const Node {
        self.search(key).0
    }

    /// About how many of the list's `len` entries are in `[start, limit)`
    /// (internal keys). A level's nodes are a uniform sample of the list
    /// (each node reaches level `l` with probability `BRANCHING^-l`), so the
    /// range's share of the nodes on a level of about [`SAMPLE`] nodes,
    /// walked whole, is its share of the entries, to a few percent. A range
    /// that holds few sampled nodes is counted exactly on level 0 instead,
    /// while that walk stays short. (RocksDB's `EstimateCount` descends once
    /// and weighs each step by `BRANCHING^l`: cheaper, but off by several
    /// times on the top levels' few nodes.)
    pub(crate) fn approximate_range_count(&self, start: &[u8], limit: &[u8], len: u64) -> u64 {
        /// Nodes the sampled level should hold.
        const SAMPLE: u64 = 1024;
        /// Fewer sampled nodes in the range than this: count it exactly.
        const FEW: u64 = 32;
        let top = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        let mut level = 0;
        while level < top && len / u64::from(BRANCHING).pow(level as u32 + 1) >= SAMPLE {
            level += 1;
        }
        let less = |node: *const Node, key: &[u8]| {
            // SAFETY: a published node of this list.
            self.cmp.compare_internal(unsafe { Node::key(node) }, key) == Ordering::Less
        };
        let (mut below_start, mut below_limit, mut total) = (0u64, 0u64, 0u64);
        // SAFETY (links, here and below): as in `descend`.
        let mut x = unsafe { Node::next(self.head(), level) };
        while !x.is_null() {
            below_start += u64::from(less(x, start));
            below_limit += u64::from(less(x, limit));
            total += 1;
            x = unsafe { Node::next(x, level) };
        }
        let sampled = below_limit.saturating_sub(below_start);
        if level == 0 || total == 0 {
            return sampled;
        }
        if sampled < FEW {
            // About `sampled * BRANCHING^level` nodes: walk them, with room.
            let cap = (FEW + 1) * u64::from(BRANCHING).pow(level as u32) * 2;
            let mut x = self.find_greater_or_equal(start);
            let mut n = 0;
            while !x.is_null() && less(x, limit) && n <= cap {
                n += 1;
                x = unsafe { Node::next(x, 0) };
            }
            if n <= cap {
                return n;
            }
        }
        (u128::from(sampled) * u128::from(len) / u128::from(total)) as u64
    }

    /// The last node, or the head when empty.
    fn find_last(&self) -> *const Node {
        let mut x = self.head();
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: as in `descend`.
            let next = unsafe { Node::next(x, level) };
            if !next.is_null() {
                x = next;
            } else if level == 0 {
                return x;
            } else {
                level -= 1;
            }
        }
    }

    /// A cursor on this list, at nothing; position it with a seek. It
    /// borrows the list (contract 10).
    pub fn cursor(&self) -> Cursor<&SkipList> {
        Cursor::new(self)
    }

    /// Calls `f` for every entry in order.
    #[cfg(test)]
    pub(crate) fn for_each<E>(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<(), E>) -> Result<(), E> {
        // SAFETY: links from the head lead to published nodes of this list.
        let mut x = unsafe { Node::next(self.head(), 0) };
        while !x.is_null() {
            unsafe {
                f(Node::key(x), Node::value(x))?;
                x = Node::next(x, 0);
            }
        }
        Ok(())
    }

    /// The first entry `>= key`.
    #[cfg(test)]
    pub(crate) fn lower_bound(&self, key: &[u8]) -> Option<(&[u8], &[u8])> {
        let x = self.find_greater_or_equal(key);
        // SAFETY: a published node of this list, which `&self` keeps alive.
        (!x.is_null()).then(|| unsafe { (Node::key(x), Node::value(x)) })
    }
}

/// What a [`Cursor`] reaches its list through (contract 10): a borrow of
/// the list, or an `Arc` of a [`ListOwner`].
///
/// # Safety
/// Every list [`ListRef::list`] returns stays alive and in place for as
/// long as the value lives, wherever the value is moved: a cursor keeps
/// node pointers found through one call and follows them in later ones.
pub unsafe trait ListRef {
    /// The list.
    fn list(&self) -> &SkipList;
}

// SAFETY: the list outlives the borrow, and a cursor holding the borrow
// cannot outlive it; moving a reference does not move the list.
unsafe impl ListRef for &SkipList {
    fn list(&self) -> &SkipList {
        self
    }
}

/// What holds a skip list (the memtable), so that a cursor can keep it
/// alive by owning an `Arc` of it (contract 10). `skip_list` returns the
/// same list every time.
pub(crate) trait ListOwner {
    /// The list held.
    fn skip_list(&self) -> &SkipList;
}

// SAFETY: the value of an `Arc` stays in place while any `Arc` of it lives,
// however the `Arc` moves, and the cursor that owns this one never lends it
// out, so the value is only ever shared: never dropped, moved or mutably
// borrowed while the cursor lives (`Arc::get_mut` needs a `&mut Arc`).
// Safe code cannot free or move what it lends as `&SkipList` from `&T`
// while `T` is shared (that borrow could be held as long as `T` is), so
// every list `skip_list` returns lives as long as the cursor. (One that
// answered with another list each time would misplace the cursor, not
// dangle it: it reads only nodes reached through lists that all live as
// long as it, and compares nodes with a head by address alone.)
unsafe impl<T: ListOwner + ?Sized> ListRef for Arc<T> {
    fn list(&self) -> &SkipList {
        (**self).skip_list()
    }
}

/// A position in a [`SkipList`], at an entry or at nothing. It owns what
/// it reaches its list through ([`ListRef`], contract 10) and its methods
/// take no list, so it reads only the list it was made on, while that list
/// lives.
pub struct Cursor<L: ListRef> {
    list: L,
    /// Null, or a published node of `list`'s list.
    node: *const Node,
}

// SAFETY: a node pointer into a list that is itself `Send + Sync`; the cursor
// only reads through it, and owns what keeps the list alive (`ListRef`).
unsafe impl<L: ListRef + Send> Send for Cursor<L> {}

impl<L: ListRef> Cursor<L> {
    /// A cursor at nothing on the list `list` reaches; position it with a
    /// seek.
    pub(crate) fn new(list: L) -> Self {
        Cursor { list, node: ptr::null() }
    }

    /// True when at an entry.
    pub fn valid(&self) -> bool {
        !self.node.is_null()
    }

    fn set_unless_head(&mut self, x: *const Node) {
        self.node = if ptr::eq(x, self.list.list().head()) { ptr::null() } else { x };
    }

    /// At the first entry.
    pub fn seek_to_first(&mut self) {
        // SAFETY: the head is a node of the list.
        self.node = unsafe { Node::next(self.list.list().head(), 0) };
        self.prefetch_next();
    }

    /// At the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        let last = self.list.list().find_last();
        self.set_unless_head(last);
    }

    /// At the first entry `>= target`. When the list's key index names
    /// the newest entry of the target's user key (contract 5), from that
    /// entry without a descent: nothing before it can be `>= target`, since
    /// it is the first of its user key, and the key's versions follow it.
    /// A thread whose recent seeks mostly met keys the index does not hold
    /// asks it for one seek in 16 ([`SEEK_ODDS`]).
    pub(crate) fn seek(&mut self, target: &[u8]) {
        let list = self.list.list();
        if let Some(index) = &list.index {
            let user_key = crate::key::user_key(target);
            let newest = SEEK_ODDS.with(|cell| {
                let mut odds = cell.get();
                let tried = odds.worth_trying().then(|| match index.lookup(user_key) {
                    Indexed::Newest(x) => Some(x),
                    Indexed::Absent | Indexed::Unknown => None,
                });
                if let Some(found) = tried {
                    odds.record(found.is_some());
                }
                cell.set(odds);
                tried.flatten()
            });
            if let Some(x) = newest {
                self.node = first_at_or_after(list, x, user_key, target);
                self.prefetch_next();
                return;
            }
        }
        self.seek_by_descent(target);
    }

    /// At the first entry `>= target`, found by a descent (from the
    /// target's prefix's first entry when the list keeps them, contract 8).
    pub(crate) fn seek_by_descent(&mut self, target: &[u8]) {
        self.node = self.list.list().find_greater_or_equal(target);
        self.prefetch_next();
    }

    /// At the first entry `>= target` if it has `target`'s user key;
    /// otherwise at some entry of another user key, or at nothing. For
    /// point lookups, which read only that key's versions: with a key index
    /// (contract 5) this needs no descent.
    pub(crate) fn seek_versions(&mut self, target: &[u8]) {
        let list = self.list.list();
        let Some(index) = &list.index else { return self.seek_by_descent(target) };
        let user_key = crate::key::user_key(target);
        match index.lookup(user_key) {
            Indexed::Absent => self.node = ptr::null(),
            Indexed::Unknown => self.seek_by_descent(target),
            Indexed::Newest(x) => self.node = first_at_or_after(list, x, user_key, target),
        }
    }

    /// At the last entry `<= target`.
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if !self.valid() {
            self.seek_to_last();
        } else if self.list.list().cmp.compare_internal(self.key(), target) == Ordering::Greater {
            self.prev();
        }
    }

    /// At the entry after this one (at nothing after the last).
    pub(crate) fn next(&mut self) {
        if self.valid() {
            // SAFETY: a valid cursor is at a published node of its list,
            // which is alive (contract 10).
            self.node = unsafe { Node::next(self.node, 0) };
            self.prefetch_next();
        }
    }

    /// Starts loading the node after the current one: nodes lie in the
    /// arena in the order they were inserted, not in key order, so on a
    /// large memtable each step of a scan misses the cache, and that miss
    /// then overlaps what the caller does between steps (a scan's merge
    /// with the tables, its consumer) instead of stalling the next step.
    fn prefetch_next(&self) {
        if !self.node.is_null() {
            // SAFETY: a published node of the live list; its link 0 was
            // initialised before it was published (contract 3).
            prefetch_node(unsafe { Node::next(self.node, 0) });
        }
    }

    /// At the entry before this one (a search from the head, as LevelDB's:
    /// nodes have no back links).
    pub(crate) fn prev(&mut self) {
        if self.valid() {
            let x = self.list.list().find_less_than(self.key());
            self.set_unless_head(x);
        }
    }

    /// The current key; empty when not valid.
    pub(crate) fn key(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: a published node of the cursor's list, which lives as
        // long as the cursor (contract 10), and so as long as `&self`.
        unsafe { Node::key(self.node) }
    }

    /// The current value; empty when not valid.
    pub(crate) fn value(&self) -> &[u8] {
        if self.node.is_null() {
            return &[];
        }
        // SAFETY: as `key`.
        unsafe { Node::value(self.node) }
    }
}

/// The hint slot of `prefix` in a table of `slots` (not 0) slots
/// (Lemire's multiply-shift range reduction of its hash).
fn hint_slot(prefix: &[u8], slots: usize) -> usize {
    ((u128::from(xxhash_rust::xxh3::xxh3_64(prefix)) * slots as u128) >> 64) as usize
}

/// A tower height: 1, then each further level with probability 1/BRANCHING.
fn random_height(rng: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT {
        // xorshift64*: the writer's own generator, no shared state.
        *rng ^= *rng >> 12;
        *rng ^= *rng << 25;
        *rng ^= *rng >> 27;
        let r = rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        if !((r >> 32) as u32).is_multiple_of(BRANCHING) {
            break;
        }
        height += 1;
    }
    height
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    /// An internal key whose order is the model's: `BTreeMap` keyed by
    /// (user key, reversed sequence) sorts as `compare_bytewise_internal_keys` does.
    fn ikey(user: u32, seq: u64) -> Vec<u8> {
        make_internal_key(&user.to_be_bytes(), seq, ValueKind::Value)
    }

    fn model_key(user: u32, seq: u64) -> (u32, std::cmp::Reverse<u64>) {
        (user, std::cmp::Reverse(seq))
    }

    fn all(list: &SkipList) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v = Vec::new();
        list.for_each::<()>(|k, val| {
            v.push((k.to_vec(), val.to_vec()));
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn matches_a_sorted_model_forwards_backwards_and_in_seeks() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..4 {
            let list = SkipList::new(UserComparator::BYTEWISE);
            let mut model = BTreeMap::new();
            let n = [0, 1, 50, if cfg!(miri) { 300 } else { 3000 }][round];
            for i in 0..n {
                // Few user keys and few sequences: many versions and some
                // exact repeats, which replace.
                let (user, seq) = (rng.gen_range(0..200u32), rng.gen_range(0..50u64));
                let len = if i % 97 == 0 { 20_000 } else { rng.gen_range(0..40) };
                let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                list.insert(&ikey(user, seq), &value);
                model.insert(model_key(user, seq), (ikey(user, seq), value));
            }
            let expected: Vec<_> = model.values().cloned().collect();
            assert_eq!(all(&list), expected, "round {round}: for_each order or contents");
            assert_eq!(list.is_empty(), expected.is_empty());

            // Cursor forwards and backwards.
            let mut c = list.cursor();
            c.seek_to_first();
            let mut fwd = Vec::new();
            while c.valid() {
                fwd.push((c.key().to_vec(), c.value().to_vec()));
                c.next();
            }
            assert_eq!(fwd, expected);
            c.seek_to_last();
            let mut back = Vec::new();
            while c.valid() {
                back.push((c.key().to_vec(), c.value().to_vec()));
                c.prev();
            }
            back.reverse();
            assert_eq!(back, expected);

            // Seeks at present and absent keys.
            for _ in 0..if cfg!(miri) { 30 } else { 300 } {
                let (user, seq) = (rng.gen_range(0..201u32), rng.gen_range(0..51u64));
                let target = ikey(user, seq);
                let ge = model.range(model_key(user, seq)..).next().map(|(_, v)| v.clone());
                let le = model.range(..=model_key(user, seq)).next_back().map(|(_, v)| v.clone());
                c.seek(&target);
                assert_eq!(c.valid().then(|| (c.key().to_vec(), c.value().to_vec())), ge);
                assert_eq!(list.lower_bound(&target).map(|(k, v)| (k.to_vec(), v.to_vec())), ge);
                c.seek_for_prev(&target);
                assert_eq!(c.valid().then(|| (c.key().to_vec(), c.value().to_vec())), le);
            }
        }
    }

    #[test]
    fn searches_that_go_down_on_key_prefixes_land_where_comparisons_do() {
        // User keys of 0 to 12 bytes over {0x00, 0x01, 0xff}: many share
        // their first eight bytes, many are prefixes of others (padding
        // meets real zero bytes), so the prefix decides only some steps
        // (contract 9) and the rest must compare.
        let mut rng = rand::rngs::StdRng::seed_from_u64(19);
        let user = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            let len = rng.gen_range(0..=12);
            (0..len).map(|_| [0x00, 0x01, 0xff][rng.gen_range(0..3)]).collect()
        };
        for &reverse in &[false, true] {
            let cmp = if reverse {
                UserComparator::new(&crate::comparator::reverse_bytewise())
            } else {
                UserComparator::BYTEWISE
            };
            let list = SkipList::new(cmp.clone());
            let mut model: Vec<Vec<u8>> = Vec::new();
            for seq in 1..=if cfg!(miri) { 300 } else { 6000 } {
                let key = make_internal_key(&user(&mut rng), seq, ValueKind::Value);
                list.insert(&key, b"v");
                model.push(key);
            }
            model.sort_by(|a, b| cmp.compare_internal(a, b));
            check_levels(&list, "prefixes");
            for _ in 0..if cfg!(miri) { 100 } else { 3000 } {
                let target = make_internal_key(&user(&mut rng), rng.gen_range(0..7000), ValueKind::Value);
                let at = model.partition_point(|k| cmp.compare_internal(k, &target) == Ordering::Less);
                let found = list.lower_bound(&target).map(|(k, _)| k.to_vec());
                assert_eq!(found.as_ref(), model.get(at), "reverse {reverse}: the first key at or after the target");
                let mut c = list.cursor();
                c.seek_for_prev(&target);
                let le = model.partition_point(|k| cmp.compare_internal(k, &target) != Ordering::Greater);
                let expected = le.checked_sub(1).map(|i| &model[i]);
                assert_eq!(
                    c.valid().then(|| c.key().to_vec()).as_ref(),
                    expected,
                    "reverse {reverse}: the last key at or before it"
                );
            }
        }
    }

    #[test]
    fn descents_run_together_end_where_single_descents_do() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for n in [0usize, 1, 40, 5000] {
            let list = SkipList::new(UserComparator::BYTEWISE);
            for _ in 0..n {
                list.insert(&ikey(rng.gen_range(1..1000u32), rng.gen_range(1..50u64)), b"v");
            }
            let before = all(&list);
            for lanes in [1, 2, 7, WARM_LANES, WARM_LANES + 3] {
                // Keys before, inside and after the list's range, some equal
                // to present keys.
                let keys: Vec<Vec<u8>> =
                    (0..lanes).map(|_| ikey(rng.gen_range(0..1001u32), rng.gen_range(0..51u64))).collect();
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let ends = list.descend_together(&refs);
                for (i, k) in keys.iter().enumerate().take(WARM_LANES) {
                    assert!(ptr::eq(ends[i], list.find_less_than(k)), "n {n}, lanes {lanes}, key {i}");
                }
                list.warm(&refs);
            }
            assert_eq!(all(&list), before, "warming changed the list");
        }
    }

    /// `seek_versions` through the index lands where a seek does whenever
    /// that entry has the target's user key, and never on another entry of
    /// that user key; with slots for every key, for a few (the index
    /// saturates) and with none.
    #[test]
    fn point_lookups_through_the_key_index_match_seeks() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        // (first tier, second tier): none, one tier that saturates or not,
        // and two tiers, the second saturating or not.
        for tiers in [None, Some((16, 0)), Some((100, 0)), Some((4096, 0)), Some((16, 200)), Some((16, 4096))] {
            let list = match tiers {
                None => SkipList::with_key_index(UserComparator::BYTEWISE, 0),
                Some((small, large)) => SkipList::with_index_tiers(UserComparator::BYTEWISE, small, large),
            };
            assert_eq!(list.index.is_some(), tiers.is_some());
            let slots = format!("{tiers:?}");
            for round in 0..6 {
                for _ in 0..300 {
                    // Versions in any order, some replacing an equal key.
                    let (user, seq) = (rng.gen_range(0..400u32), rng.gen_range(1..60u64));
                    list.insert(&ikey(user, seq), &[round]);
                }
                for _ in 0..2000 {
                    let (user, seq) = (rng.gen_range(0..420u32), rng.gen_range(0..64u64));
                    let target = ikey(user, seq);
                    let mut want = list.cursor();
                    want.seek_by_descent(&target);
                    // A seek through the index lands exactly where a descent does.
                    let mut seek = list.cursor();
                    seek.seek(&target);
                    let at = |c: &Cursor<&SkipList>| c.valid().then(|| (c.key().to_vec(), c.value().to_vec()));
                    assert_eq!(at(&seek), at(&want), "slots {slots}: a seek to {user}@{seq}");
                    let mut got = list.cursor();
                    got.seek_versions(&target);
                    let of_user = |c: &Cursor<&SkipList>| c.valid() && c.key()[..4] == user.to_be_bytes();
                    if of_user(&want) {
                        assert!(got.valid(), "slots {slots}: lost {user}@{seq}");
                        assert_eq!(got.key(), want.key(), "slots {slots}: {user}@{seq}");
                        assert_eq!(got.value(), want.value());
                    } else {
                        assert!(!of_user(&got), "slots {slots}: {user}@{seq} found a version a seek does not");
                    }
                }
            }
            if let Some(ix) = &list.index {
                assert!(!ix.lost.load(AtomicOrdering::Relaxed));
                let small_full = ix.tiers[0].get().unwrap().saturated.load(AtomicOrdering::Relaxed);
                let large = ix.tiers[1].get().map(|l| l.saturated.load(AtomicOrdering::Relaxed));
                let expected = match tiers {
                    Some((4096, _)) => (false, None),
                    Some((_, 0)) => (true, None),
                    Some((_, 200)) => (true, Some(true)),
                    _ => (true, Some(false)),
                };
                assert_eq!((small_full, large), expected, "{slots}: which tiers filled");
            }
        }
    }

    /// An index of 100,000 slots is made in three tiers (4,096, 32,768 and
    /// 100,000 slots), each when the one before fills: with 25,000 keys in
    /// versions out of order, every point lookup through the tiers lands
    /// where a descent does, keys never inserted are reported absent
    /// without one, and the index charges the tiers made, not the whole.
    #[test]
    fn point_lookups_across_index_tiers_match_descents() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(29);
        let list = SkipList::with_key_index(UserComparator::BYTEWISE, 100_000);
        let ix = list.index.as_ref().unwrap();
        let shapes: Vec<usize> = ix.shapes.iter().map(|s| s.0).filter(|&n| n > 0).collect();
        assert_eq!(shapes, [4096, 32_768, 100_000]);
        assert_eq!(list.index_bytes(), 4096 * 8, "a new list charges its first tier only");
        let keys = 25_000u32;
        let mut order: Vec<u32> = (0..keys).collect();
        use rand::seq::SliceRandom;
        order.shuffle(&mut rng);
        let mut made = Vec::new();
        for (i, user) in order.iter().enumerate() {
            // Each key's versions: a middle one first, then a newer and an
            // older one for every fourth key (out of sequence order).
            list.insert(&ikey(*user, 20), b"mid");
            if user % 4 == 0 {
                list.insert(&ikey(*user, 30), b"new");
                list.insert(&ikey(*user, 10), b"old");
            }
            made.push((i, ix.made().len()));
        }
        let tiers_at = |n: usize| made.iter().find(|(_, t)| *t == n).map(|(i, _)| *i);
        assert!(tiers_at(2).is_some() && tiers_at(3).is_some(), "the tiers were not all made");
        assert_eq!(list.index_bytes(), (4096 + 32_768 + 100_000) * 8);
        for user in 0..keys + 500 {
            let target = ikey(user, 100);
            let mut want = list.cursor();
            want.seek_by_descent(&target);
            let mut got = list.cursor();
            got.seek_versions(&target);
            let of_user = |c: &Cursor<&SkipList>| c.valid() && c.key()[..4] == user.to_be_bytes();
            if user < keys {
                assert!(of_user(&want));
                assert_eq!(got.valid().then(|| got.key().to_vec()), Some(want.key().to_vec()), "key {user}");
                assert_eq!(got.value(), if user % 4 == 0 { &b"new"[..] } else { &b"mid"[..] }, "key {user}");
            } else {
                assert!(!of_user(&got), "key {user} was never inserted");
                assert!(matches!(ix.lookup(&user.to_be_bytes()), Indexed::Absent), "key {user}: not reported absent");
            }
        }
    }

    /// Every level of `list`, each a chain of keys from the head, checked
    /// sorted; and every node's recorded level-0 predecessor checked to be
    /// the node before it.
    fn check_levels(list: &SkipList, what: &str) {
        // SAFETY: links from the head lead to published nodes of the list.
        unsafe {
            for level in 0..MAX_HEIGHT {
                let mut x = Node::next(list.head(), level);
                let mut before: *const Node = list.head();
                while !x.is_null() {
                    assert!(Node::height(x) > level, "{what}: a node of height {} on level {level}", Node::height(x));
                    if !ptr::eq(before, list.head()) {
                        let order = list.cmp.compare_internal(Node::key(before), Node::key(x));
                        assert_eq!(order, Ordering::Less, "{what}: level {level} out of order");
                    }
                    if level == 0 {
                        assert!(
                            ptr::eq(Node::prev(x), before),
                            "{what}: a node's recorded predecessor is not the one before it"
                        );
                    } else {
                        let stored = Node::next_prefix(before, level);
                        assert_eq!(
                            stored,
                            key_prefix(Node::key(x)),
                            "{what}: level {level} keeps another node's prefix"
                        );
                    }
                    before = x;
                    x = Node::next(x, level);
                }
            }
        }
    }

    #[test]
    fn new_versions_splice_in_before_the_newest_and_keep_every_level_sorted() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(23);
        let reverse = UserComparator::new(&crate::comparator::reverse_bytewise());
        // (name, list, fewest splices expected): about 90 % of the inserts
        // are a key's next version and 3 in 4 get a tower of height 1; with
        // saturated tiers only the keys indexed before they filled splice.
        for (name, list, fewest) in [
            ("bytewise", SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12), 3000),
            ("reverse", SkipList::with_key_index(reverse, 1 << 12), 3000),
            ("saturating tiers", SkipList::with_index_tiers(UserComparator::BYTEWISE, 16, 64), 200),
        ] {
            let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut next_seq = vec![1u64; 300];
            for i in 0..6000u32 {
                let user = rng.gen_range(0..300u32);
                // Mostly the next version (a splice before the newest), some
                // older versions out of order, some exact repeats (replace).
                let seq = match rng.gen_range(0..10) {
                    0 => rng.gen_range(1..=next_seq[user as usize]),
                    _ => {
                        next_seq[user as usize] += 1 + rng.gen_range(0..3);
                        next_seq[user as usize]
                    }
                };
                let key = ikey(user, seq);
                let value = i.to_le_bytes().to_vec();
                list.insert(&key, &value);
                model.retain(|(k, _)| k != &key);
                model.push((key, value));
            }
            model.sort_by(|a, b| list.cmp.compare_internal(&a.0, &b.0));
            assert_eq!(all(&list), model, "{name}: contents or order");
            check_levels(&list, name);
            let spliced = list.writer.lock().spliced;
            assert!(spliced > fewest, "{name}: only {spliced} inserts spliced in");
            for (k, v) in model.iter().step_by(7) {
                let mut c = list.cursor();
                c.seek_versions(k);
                assert_eq!((c.key(), c.value()), (&k[..], &v[..]), "{name}: a point lookup");
            }
        }
    }

    /// A user key of a 2-byte prefix and a 4-byte rest.
    fn prefixed(prefix: u16, rest: u32) -> Vec<u8> {
        let mut k = prefix.to_be_bytes().to_vec();
        k.extend_from_slice(&rest.to_be_bytes());
        k
    }

    #[test]
    fn inserts_land_near_their_prefixs_hint_and_keep_every_level_sorted() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(31);
        let reverse = UserComparator::new(&crate::comparator::reverse_bytewise());
        // (name, list, prefixes, keys per prefix, fewest hinted inserts):
        // about 3 in 4 inserts get a tower of height 1, and most find a key
        // of their prefix already there. Four slots for 200 prefixes: most
        // hints are another prefix's and are passed over; prefixes of
        // thousands of keys walk further than a hint allows, mostly.
        for (name, list, prefixes, per_prefix, fewest) in [
            (
                "bytewise",
                SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12).with_prefix_hints(1024),
                200,
                10,
                2000,
            ),
            ("reverse", SkipList::with_key_index(reverse, 1 << 12).with_prefix_hints(1024), 200, 10, 2000),
            ("no key index", SkipList::new(UserComparator::BYTEWISE).with_prefix_hints(1024), 200, 10, 2000),
            (
                "shared slots",
                SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12).with_prefix_hints(4),
                200,
                10,
                0,
            ),
            (
                "long prefixes",
                SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12).with_prefix_hints(1024),
                2,
                3000,
                0,
            ),
        ] {
            let mut model: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::new();
            let mut inserted: Vec<Vec<u8>> = Vec::new();
            for i in 0..6000u32 {
                // Mostly new keys, some new versions of a key inserted
                // before, some exact repeats (which replace).
                let key = match rng.gen_range(0..20) {
                    0 if !inserted.is_empty() => inserted[rng.gen_range(0..inserted.len())].clone(),
                    1 if !inserted.is_empty() => {
                        let k = &inserted[rng.gen_range(0..inserted.len())];
                        make_internal_key(crate::key::user_key(k), rng.gen_range(1..1000), ValueKind::Value)
                    }
                    _ => {
                        let user = prefixed(rng.gen_range(0..prefixes), rng.gen_range(0..per_prefix));
                        make_internal_key(&user, rng.gen_range(1..1000), ValueKind::Value)
                    }
                };
                let value = i.to_le_bytes().to_vec();
                list.insert_with_prefix(&key, &value, 2);
                model.insert(key.clone(), value);
                inserted.push(key);
            }
            let mut model: Vec<_> = model.into_iter().collect();
            model.sort_by(|a, b| list.cmp.compare_internal(&a.0, &b.0));
            assert_eq!(all(&list), model, "{name}: contents or order");
            check_levels(&list, name);
            let hinted = list.writer.lock().hinted;
            assert!(hinted > fewest, "{name}: only {hinted} inserts landed near their hint");
            if list.index.is_some() {
                for (k, v) in model.iter().step_by(7) {
                    let mut c = list.cursor();
                    c.seek_versions(k);
                    assert_eq!((c.key(), c.value()), (&k[..], &v[..]), "{name}: a point lookup");
                }
            }
        }
    }

    /// For each node recorded in a list's prefix firsts, whether it is the
    /// first node of its prefix (contract 8's invariant), and how many
    /// entries hold a node.
    fn check_firsts(list: &SkipList, what: &str) -> usize {
        let firsts = list.firsts.as_ref().expect("a list with prefix firsts");
        let mut recorded = 0;
        for bucket in firsts.buckets.iter() {
            for e in &bucket.0 {
                let v = e.load(AtomicOrdering::Relaxed);
                if v == 0 {
                    continue;
                }
                recorded += 1;
                let node = KeyIndex::node(v);
                // SAFETY: entries hold nodes of the list; links lead to them.
                unsafe {
                    let prefix =
                        firsts.prefix_of(crate::key::user_key(Node::key(node))).expect("a recorded node has a prefix");
                    let mut x = Node::next(list.head(), 0);
                    while !x.is_null() && firsts.prefix_of(crate::key::user_key(Node::key(x))) != Some(prefix) {
                        x = Node::next(x, 0);
                    }
                    assert!(ptr::eq(x, node), "{what}: the node recorded for prefix {prefix:?} is not its first");
                }
            }
        }
        recorded
    }

    #[test]
    fn seeks_from_a_prefixs_first_node_land_where_descents_do() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(37);
        let reverse = UserComparator::new(&crate::comparator::reverse_bytewise());
        let fixed = crate::prefix::fixed(2);
        let capped = crate::prefix::capped(3);
        // (name, list, user-key lengths): capped prefixes of keys shorter
        // than the cap are the whole key, so in the reverse order a key's
        // predecessor may start with its prefix and have another one; a
        // table of 8 entries holds few of the prefixes, the rest churn.
        let lists = [
            (
                "bytewise fixed",
                SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12).with_prefix_firsts(fixed.clone(), 4096),
                1..6,
            ),
            (
                "reverse fixed",
                SkipList::with_key_index(reverse.clone(), 1 << 12).with_prefix_firsts(fixed.clone(), 4096),
                1..6,
            ),
            ("bytewise capped", SkipList::new(UserComparator::BYTEWISE).with_prefix_firsts(capped.clone(), 4096), 0..6),
            ("reverse capped", SkipList::with_key_index(reverse, 1 << 12).with_prefix_firsts(capped, 4096), 0..6),
            ("eight entries", SkipList::new(UserComparator::BYTEWISE).with_prefix_firsts(fixed.clone(), 8), 1..6),
            (
                "with hints",
                SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 12)
                    .with_prefix_hints(64)
                    .with_prefix_firsts(fixed, 64),
                2..6,
            ),
        ];
        for (name, list, lens) in lists {
            let random_user_key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
                let len = rng.gen_range(lens.clone());
                (0..len).map(|_| b"abc"[rng.gen_range(0..3)]).collect()
            };
            let (mut from_first, mut seeks) = (0, 0);
            for round in 0..40 {
                for _ in 0..50 {
                    let key =
                        make_internal_key(&random_user_key(&mut rng), rng.gen_range(1..1_000_000), ValueKind::Value);
                    // The memtable gives its hint length; here the prefix
                    // length is the extractor's business alone.
                    list.insert_with_prefix(&key, b"v", 2.min(crate::key::user_key(&key).len()));
                }
                assert!(check_firsts(&list, name) > 0, "{name}: nothing recorded");
                for _ in 0..100 {
                    let target =
                        make_internal_key(&random_user_key(&mut rng), rng.gen_range(0..1_000_001), ValueKind::Value);
                    let want = list.search(&target).1;
                    seeks += 1;
                    if let Some(found) = list.seek_from_first(&target) {
                        from_first += 1;
                        assert!(
                            ptr::eq(found, want),
                            "{name}, round {round}: a seek from a prefix's first landed elsewhere"
                        );
                    }
                    assert!(ptr::eq(list.find_greater_or_equal(&target), want), "{name}: find_greater_or_equal");
                }
            }
            check_levels(&list, name);
            assert!(from_first * 5 > seeks, "{name}: only {from_first} of {seeks} seeks started from a prefix's first");
        }
    }

    #[test]
    fn a_replace_turns_prefix_firsts_off() {
        let list = SkipList::new(UserComparator::BYTEWISE).with_prefix_firsts(crate::prefix::fixed(2), 64);
        for u in 0..100u32 {
            list.insert(&ikey(u, 1), b"v");
        }
        // ikey's user keys are 4 bytes; 100 of them share one 2-byte prefix.
        assert!(list.seek_from_first(&ikey(0, 1)).is_some());
        list.insert(&ikey(0, 1), b"again");
        assert!(list.seek_from_first(&ikey(0, 1)).is_none(), "a list that replaced a node reads no firsts");
        assert_eq!(list.lower_bound(&ikey(0, 1)).map(|(_, v)| v.to_vec()), Some(b"again".to_vec()));
    }

    #[test]
    fn a_hint_a_replace_unlinked_is_not_followed() {
        let list = SkipList::new(UserComparator::BYTEWISE).with_prefix_hints(16);
        // (Towers' heights come from the list's seeded generator: the
        // inserts below are the same on every run.)
        let a = make_internal_key(&prefixed(1, 10), 5, ValueKind::Value);
        list.insert_with_prefix(&a, b"old", 2);
        // The same key, inserted without a prefix: it replaces the hinted
        // node, and the hint is left pointing at the unlinked one.
        list.insert(&a, b"new");
        let before = list.writer.lock().hinted;
        for rest in [11, 9, 12, 8] {
            list.insert_with_prefix(&make_internal_key(&prefixed(1, rest), 5, ValueKind::Value), b"v", 2);
        }
        let keys: Vec<_> = all(&list).into_iter().map(|(k, v)| (crate::key::user_key(&k).to_vec(), v)).collect();
        let want: Vec<_> = [(8, &b"v"[..]), (9, b"v"), (10, b"new"), (11, b"v"), (12, b"v")]
            .into_iter()
            .map(|(r, v)| (prefixed(1, r), v.to_vec()))
            .collect();
        assert_eq!(keys, want);
        check_levels(&list, "after a replace");
        // The hint of the unlinked node was refused; the inserts after the
        // first one of the prefix's new keys used the fresh hints.
        assert!(list.writer.lock().hinted > before, "the fresh hints are used");
    }

    #[test]
    fn inserts_stop_trying_to_splice_while_their_keys_are_new_and_resume_when_they_are_not() {
        let mut odds = SpliceOdds { score: 0, inserts: 0 };
        assert!(odds.worth_trying());
        for _ in 0..40 {
            odds.record(false);
        }
        let tries = (0..160).filter(|_| odds.worth_trying()).count();
        assert_eq!(tries, 10, "one insert in 16 keeps trying");
        for _ in 0..5 {
            odds.record(true);
        }
        assert!((0..50).all(|_| odds.worth_trying()), "successes make every insert try again");
        // One success in four tries keeps trying.
        for i in 0..400 {
            odds.record(i % 4 == 0);
        }
        assert!(odds.worth_trying());
    }

    #[test]
    fn only_the_built_in_orders_get_a_key_index() {
        struct Shortlex;
        impl crate::comparator::Comparator for Shortlex {
            fn name(&self) -> &str {
                "test.Shortlex"
            }
            fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
                a.len().cmp(&b.len()).then_with(|| a.cmp(b))
            }
        }
        let user: Arc<dyn crate::comparator::Comparator> = Arc::new(Shortlex);
        assert!(SkipList::with_key_index(UserComparator::new(&user), 64).index.is_none());
        let reverse = UserComparator::new(&crate::comparator::reverse_bytewise());
        let list = SkipList::with_key_index(reverse, 64);
        assert_eq!(list.index_bytes(), 64 * 8);
        // Sizes are bounded both ways; a large index starts with its first
        // tier and makes the next when that fills (at half its slots).
        assert_eq!(SkipList::with_key_index(UserComparator::BYTEWISE, 3).index_bytes(), 16 * 8);
        let big = SkipList::with_key_index(UserComparator::BYTEWISE, usize::MAX / 64);
        let tiers: Vec<usize> = big.index.as_ref().unwrap().shapes.iter().map(|s| s.0).collect();
        assert_eq!(tiers, [4096, 32_768, 262_144, 2_097_152, 8 << 20]);
        assert_eq!(big.index_bytes(), SMALL_INDEX_SLOTS * 8);
        for i in 0..=(SMALL_INDEX_SLOTS / 2) as u32 {
            big.insert(&ikey(i, 1), b"");
        }
        assert_eq!(big.index_bytes(), (SMALL_INDEX_SLOTS + SMALL_INDEX_SLOTS * INDEX_TIER_GROWTH) * 8);
        list.insert(&ikey(3, 1), b"a");
        list.insert(&ikey(3, 9), b"b");
        let mut c = list.cursor();
        c.seek_versions(&ikey(3, 5));
        assert_eq!(c.value(), b"a", "the newest version at or below the sequence");
    }

    #[test]
    fn memory_usage_is_the_bytes_of_the_nodes() {
        let list = SkipList::new(UserComparator::BYTEWISE);
        assert_eq!(list.memory_usage(), 0);
        list.insert(&ikey(1, 1), &[7; 100]);
        let one = list.memory_usage();
        // Header, one or more links, 12-byte key, 100-byte value, rounded to 8.
        assert!((16 + 8 + 112..=16 + tower_bytes(MAX_HEIGHT) + 112).contains(&one) && one.is_multiple_of(8), "{one}");
        // A value bigger than a quarter block gets a block of its own and is
        // still charged by its size.
        list.insert(&ikey(2, 1), &vec![9; BLOCK_BYTES]);
        assert!(list.memory_usage() - one >= BLOCK_BYTES + 16 + 8 + 12);
        assert_eq!(list.lower_bound(&ikey(2, 1)).unwrap().1, &vec![9; BLOCK_BYTES][..]);
    }

    /// Allocates past an arena's heap blocks and through several mapped
    /// ones, checking each allocation is aligned and zeroed and writing
    /// `tag`-derived bytes into it; then checks nothing was overwritten.
    fn fill_arena(arena: &mut Arena, tag: usize) {
        // Sizes of every kind of small node.
        let sizes = [8usize, 24, 120, 1000, 4096, BLOCK_BYTES / 4];
        let mut got: Vec<(*mut u8, usize)> = Vec::new();
        let mut total = 0;
        let byte = |i: usize| ((i + tag) % 251) as u8 + 1;
        while total < HEAP_ARENA_BYTES + 3 * MAPPED_BLOCK_BYTES {
            let i = got.len();
            let n = sizes[i % sizes.len()];
            let at = arena.alloc(n);
            assert_eq!(at as usize % 8, 0, "allocation {i} not 8-aligned");
            // SAFETY: `alloc` returned `n` bytes this test owns.
            let bytes = unsafe { std::slice::from_raw_parts_mut(at, n) };
            assert!(bytes.iter().all(|&b| b == 0), "allocation {i} of {n} bytes not zeroed");
            bytes.fill(byte(i));
            got.push((at, n));
            total += n;
        }
        let mapped = arena.blocks.iter().filter(|b| matches!(b, ArenaBlock::Mapped(_))).count();
        if cfg!(target_os = "linux") {
            assert!(mapped >= 3, "{mapped} mapped blocks after {total} bytes");
        }
        let heap = arena.blocks.iter().filter(|b| matches!(b, ArenaBlock::Heap(_))).count() * BLOCK_BYTES;
        assert!(heap <= HEAP_ARENA_BYTES + BLOCK_BYTES, "{heap} bytes of heap blocks");
        for (i, &(at, n)) in got.iter().enumerate() {
            // SAFETY: as above; the arena is still alive.
            let bytes = unsafe { std::slice::from_raw_parts(at, n) };
            assert!(bytes.iter().all(|&b| b == byte(i)), "allocation {i} of {n} bytes was overwritten");
        }
    }

    #[test]
    fn an_arena_past_its_heap_blocks_hands_out_zeroed_disjoint_memory_from_mappings() {
        // Each arena's blocks are given back when it goes, and the next
        // ones take them again (unless another test's arena took them
        // first): what they hand out is zeroed all the same.
        for tag in 0..4 {
            let mut arena = Arena::new();
            fill_arena(&mut arena, tag);
        }
    }

    #[test]
    fn kept_blocks_come_back_zeroed() {
        if cfg!(not(target_os = "linux")) {
            return;
        }
        for round in 0..8u8 {
            let at = take_mapped_block().expect("a block");
            // SAFETY: a whole block this test holds.
            let bytes = unsafe { std::slice::from_raw_parts_mut(at, MAPPED_BLOCK_BYTES) };
            assert!(bytes.iter().all(|&b| b == 0), "round {round}: a block came back dirty");
            bytes.fill(round + 1);
            give_back_mapped_block(at);
        }
    }

    #[test]
    fn a_list_larger_than_its_heap_blocks_keeps_every_entry() {
        let list = SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 14);
        let value = |i: u32| vec![(i % 256) as u8; 100 + (i % 300) as usize];
        let n = 40_000u32;
        for i in 0..n {
            list.insert(&ikey(i.wrapping_mul(2_654_435_761), 1), &value(i));
        }
        assert!(list.memory_usage() > HEAP_ARENA_BYTES + 2 * MAPPED_BLOCK_BYTES, "{}", list.memory_usage());
        for i in 0..n {
            let k = ikey(i.wrapping_mul(2_654_435_761), 1);
            let (key, v) = list.lower_bound(&k).expect("present");
            assert_eq!((key, v), (&k[..], &value(i)[..]), "entry {i}");
        }
    }

    #[test]
    fn readers_see_a_sorted_list_holding_everything_inserted_before_they_looked() {
        readers_see_everything_inserted_before_they_looked(SkipList::new(UserComparator::BYTEWISE));
    }

    #[test]
    fn readers_find_through_the_key_index_everything_inserted_before_they_looked() {
        // Room for every key: the index never saturates, so a key it does
        // not hold is reported absent without a descent.
        // Two tiers, the first filling early.
        let list = SkipList::with_index_tiers(UserComparator::BYTEWISE, 64, 40_000);
        readers_see_everything_inserted_before_they_looked(list);
    }

    #[test]
    fn readers_seek_through_prefix_firsts_to_everything_inserted_before_they_looked() {
        // Prefixes of 256 keys (the first three bytes of four): a seek from
        // its prefix's first walks a little or, past the walk's bound,
        // descends from the head.
        let list =
            SkipList::with_key_index(UserComparator::BYTEWISE, 1 << 15).with_prefix_firsts(crate::prefix::fixed(3), 64);
        readers_see_everything_inserted_before_they_looked(list);
    }

    fn readers_see_everything_inserted_before_they_looked(list: SkipList) {
        let list = Arc::new(list);
        let inserted = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let n: u32 = if cfg!(miri) { 300 } else { 20_000 };
        // Every key once, in a scattered order; values name their key.
        let mut order: Vec<u32> = (0..n).collect();
        use rand::seq::SliceRandom;
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(3));
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (list, inserted, done, order) =
                    (Arc::clone(&list), Arc::clone(&inserted), Arc::clone(&done), order.clone());
                std::thread::spawn(move || {
                    let mut rounds = 0;
                    while !done.load(AtomicOrdering::Acquire) || rounds < 2 {
                        rounds += 1;
                        let before = inserted.load(AtomicOrdering::Acquire);
                        // Every key inserted before this point is found.
                        for &k in order[..before].iter().rev().take(200) {
                            let (key, value) = list.lower_bound(&ikey(k, 1)).expect("an inserted key is missing");
                            assert_eq!(key, &ikey(k, 1)[..], "reader {r}");
                            assert_eq!(value, &k.to_le_bytes()[..]);
                            let mut c = list.cursor();
                            c.seek_versions(&ikey(k, 5));
                            assert!(c.valid(), "reader {r}: point lookup lost {k}");
                            assert_eq!(c.key(), &ikey(k, 1)[..], "reader {r}");
                        }
                        // Keys never inserted are not found.
                        for k in [n, n + 7, u32::MAX] {
                            let mut c = list.cursor();
                            c.seek_versions(&ikey(k, 5));
                            assert!(!c.valid() || c.key()[..4] != k.to_be_bytes(), "reader {r}: found {k}");
                        }
                        // A scan is sorted and holds at least those keys.
                        let mut c = list.cursor();
                        c.seek_to_first();
                        let mut count = 0;
                        let mut last: Option<Vec<u8>> = None;
                        while c.valid() {
                            let k = c.key().to_vec();
                            if let Some(l) = &last {
                                assert_eq!(
                                    UserComparator::BYTEWISE.compare_internal(l, &k),
                                    Ordering::Less,
                                    "reader {r}: out of order"
                                );
                            }
                            last = Some(k);
                            count += 1;
                            c.next();
                        }
                        assert!(count >= before, "reader {r}: scan saw {count} of {before} entries");
                    }
                })
            })
            .collect();
        for (i, &k) in order.iter().enumerate() {
            list.insert(&ikey(k, 1), &k.to_le_bytes());
            inserted.store(i + 1, AtomicOrdering::Release);
        }
        done.store(true, AtomicOrdering::Release);
        for r in readers {
            r.join().unwrap();
        }
        assert_eq!(all(&list).len(), n as usize);
    }

    impl ListOwner for SkipList {
        fn skip_list(&self) -> &SkipList {
            self
        }
    }

    #[test]
    fn a_cursor_that_owns_an_arc_of_its_list_reads_it_after_every_other_handle_is_gone() {
        let list = Arc::new(SkipList::new(UserComparator::BYTEWISE));
        for u in 0..100 {
            list.insert(&ikey(u, 1), &u.to_le_bytes());
        }
        let mut c = Cursor::new(Arc::clone(&list));
        c.seek(&ikey(40, 1));
        drop(list);
        let mut seen = Vec::new();
        while c.valid() {
            seen.push(c.value().to_vec());
            c.next();
        }
        assert_eq!(seen, (40..100u32).map(|u| u.to_le_bytes().to_vec()).collect::<Vec<_>>());
        c.seek_to_last();
        c.prev();
        assert_eq!(c.key(), &ikey(98, 1)[..]);
    }

    #[test]
    fn a_replaced_entry_stays_readable_from_a_cursor_on_it() {
        let list = SkipList::new(UserComparator::BYTEWISE);
        for u in 0..100 {
            list.insert(&ikey(u, 1), b"old");
        }
        let mut c = list.cursor();
        c.seek(&ikey(50, 1));
        list.insert(&ikey(50, 1), b"new");
        // The cursor still reads the node it was on, and walks on from it.
        assert_eq!(c.value(), b"old");
        c.next();
        assert_eq!(c.key(), &ikey(51, 1)[..]);
        // The list holds one entry for the key, the new one.
        assert_eq!(list.lower_bound(&ikey(50, 1)).unwrap().1, b"new");
        assert_eq!(all(&list).len(), 100);
    }
}
