//! Response bodies as a broker could send them, through the client's guard, decoder and
//! conversions. Input: `[api key: i16][version: i16][body]`, big-endian (the seeds in
//! corpus/wire_decode come from `wire::guard::tests::fuzz_seeds_pass_the_fuzzing_entry`).
//! The decoding is `kafka_watchdog::fuzz::wire_decode`, which `cargo test` also runs over
//! every file of corpus/wire_decode/; the heap bound is this target's own.
//!
//! Beyond "no panic", each input's peak heap use is measured and bounded in proportion
//! to its size: kafka-protocol reserves arrays from counts read off the wire, and a count
//! the guard let through would show up here as an allocation the body cannot back.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use libfuzzer_sys::fuzz_target;

/// Decoded structs are larger than their wire form (a 3-byte topic entry becomes a struct
/// of a few hundred bytes with its vectors); the bound leaves room for that and still
/// catches any reservation driven by an unchecked count.
const BYTES_PER_INPUT_BYTE: usize = 512;
const FIXED_ALLOWANCE: usize = 64 * 1024;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let api_key = i16::from_be_bytes([data[0], data[1]]);
    let version = i16::from_be_bytes([data[2], data[3]]);
    let body = &data[4..];

    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    kafka_watchdog::fuzz::wire_decode(data);
    let peak = PEAK.load(Relaxed).saturating_sub(before);

    let limit = FIXED_ALLOWANCE + BYTES_PER_INPUT_BYTE * body.len();
    assert!(
        peak <= limit,
        "api key {api_key} v{version}: {peak} bytes at peak for a {}-byte body (limit {limit})",
        body.len()
    );
});
