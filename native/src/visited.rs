//! The visited set: 64-bit fingerprints in one open-addressing table with linear probing.
//!
//! The same table as checker/store/visited.py's `FingerprintSet`, slot for slot: the same hash, the
//! same load limit and the same growth (by half, so a table just grown is half full, not 3/8),
//! so both engines store and grow identically and tests/test_native.py can compare them call
//! by call.

/// An empty slot. Fingerprint 0 is stored as 1 (a 2^-64 bias, as in the Python set).
const EMPTY: u64 = 0;

/// The first table of the Python set (`FingerprintSet(capacity=1 << 16)`).
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// The table's home slot for `fp` among `len`: its bits, high ones folded in, scaled to the
/// size (the high half of a 64-by-64 product; checker/store/visited.py).
#[inline]
fn home(fp: u64, len: usize) -> usize {
    (((fp ^ (fp >> 29)) as u128 * len as u128) >> 64) as usize
}

/// Where `fp` (never EMPTY) is in `table`, or the empty slot where it would go.
#[inline]
fn find(table: &[u64], fp: u64) -> usize {
    let len = table.len();
    let mut i = home(fp, len);
    while table[i] != fp && table[i] != EMPTY {
        i += 1;
        if i == len {
            i = 0;
        }
    }
    i
}

/// The size a full table of `len` slots grows to (checker/store/visited.py grown_size).
fn grown_len(len: usize) -> usize {
    len + (len / 2).max(1)
}

/// Fingerprint 0 is stored as 1.
#[inline]
fn stored(fp: u64) -> u64 {
    if fp == EMPTY { 1 } else { fp }
}

/// Open addressing over `u64` fingerprints, kept at most 3/4 full.
pub struct FpSet {
    table: Vec<u64>,
    count: usize,
    limit: usize,
}

impl FpSet {
    /// A set of `capacity` slots, at least one.
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(
            capacity >= 1,
            "FpSet capacity {capacity}: at least one slot"
        );
        FpSet {
            table: vec![EMPTY; capacity],
            count: 0,
            limit: load_limit(capacity),
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The table's size in bytes, as the Python set's `nbytes`.
    pub fn nbytes(&self) -> usize {
        self.table.len() * std::mem::size_of::<u64>()
    }

    /// Add `fp`; false if it was already there.
    pub fn add(&mut self, fp: u64) -> bool {
        let fp = stored(fp);
        let i = find(&self.table, fp);
        if self.table[i] == fp {
            return false;
        }
        self.table[i] = fp;
        self.count += 1;
        if self.count > self.limit {
            self.table = grown(&self.table, |_, _| {});
            self.limit = load_limit(self.table.len());
        }
        true
    }

    pub fn contains(&self, fp: u64) -> bool {
        let fp = stored(fp);
        self.table[find(&self.table, fp)] == fp
    }
}

/// The table grown by half; the old one holds no duplicates, so each fingerprint takes the first
/// free slot. `moved(from, to)` is told where each one went (a map moves its value with it).
fn grown(old: &[u64], mut moved: impl FnMut(usize, usize)) -> Vec<u64> {
    let mut table = vec![EMPTY; grown_len(old.len())];
    for (j, &fp) in old.iter().enumerate().filter(|&(_, &fp)| fp != EMPTY) {
        let i = find(&table, fp);
        table[i] = fp;
        moved(j, i);
    }
    table
}

/// A fingerprint set with a u32 beside each fingerprint, as checker/store/visited.py's
/// `FingerprintMap` (a worker's index of the level it keeps: fingerprint to position): an
/// FpSet's table, and the values in the same slots.
pub struct FpMap {
    set: FpSet,
    values: Vec<u32>,
}

impl FpMap {
    pub fn with_capacity(capacity: usize) -> Self {
        FpMap {
            set: FpSet::with_capacity(capacity),
            values: vec![0; capacity],
        }
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub fn get(&self, fp: u64) -> Option<u32> {
        let fp = stored(fp);
        let i = find(&self.set.table, fp);
        (self.set.table[i] == fp).then(|| self.values[i])
    }

    pub fn put(&mut self, fp: u64, value: u32) {
        let fp = stored(fp);
        let set = &mut self.set;
        let i = find(&set.table, fp);
        self.values[i] = value;
        if set.table[i] == fp {
            return;
        }
        set.table[i] = fp;
        set.count += 1;
        if set.count > set.limit {
            let mut values = vec![0; grown_len(set.table.len())];
            set.table = grown(&set.table, |j, i| values[i] = self.values[j]);
            set.limit = load_limit(set.table.len());
            self.values = values;
        }
    }

    pub fn nbytes(&self) -> usize {
        self.set.nbytes() / 8 * 12
    }
}

/// The order of `n` keys of `length` bytes each, laid end to end in `keys`: positions, smallest
/// key first (bytes compared as Python compares them). A level's path keys all have one length.
pub fn key_order(keys: &[u8], length: usize) -> Vec<u32> {
    let n = keys.len().checked_div(length).unwrap_or(0);
    let mut order: Vec<u32> = (0..n as u32).collect();
    let key = |i: u32| &keys[i as usize * length..(i as usize + 1) * length];
    order.sort_by(|&a, &b| key(a).cmp(key(b)));
    order
}

impl Default for FpSet {
    fn default() -> Self {
        FpSet::with_capacity(DEFAULT_CAPACITY)
    }
}

/// `int(capacity * 0.75)` as the Python set computes it.
fn load_limit(capacity: usize) -> usize {
    capacity / 4 * 3 + capacity % 4 * 3 / 4
}

/// The Python class `kafkamc._core.FpSet`: a thin wrapper, all logic above.
#[cfg(feature = "python")]
mod python {
    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;

    #[pyclass(name = "FpSet", module = "kafkamc._core")]
    pub struct PyFpSet(super::FpSet);

    #[pymethods]
    impl PyFpSet {
        #[new]
        #[pyo3(signature = (capacity = super::DEFAULT_CAPACITY))]
        fn new(capacity: usize) -> PyResult<Self> {
            // A ValueError for the caller's mistake; the core's assert stays for Rust callers.
            if capacity < 1 {
                return Err(PyValueError::new_err(format!(
                    "capacity {capacity}: at least one slot"
                )));
            }
            Ok(PyFpSet(super::FpSet::with_capacity(capacity)))
        }

        fn add(&mut self, fp: u64) -> bool {
            self.0.add(fp)
        }

        fn __contains__(&self, fp: u64) -> bool {
            self.0.contains(fp)
        }

        fn __len__(&self) -> usize {
            self.0.len()
        }

        #[getter]
        fn nbytes(&self) -> usize {
            self.0.nbytes()
        }
    }
}

#[cfg(feature = "python")]
pub use python::PyFpSet;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_once() {
        let mut s = FpSet::with_capacity(8);
        assert!(s.add(42));
        assert!(!s.add(42));
        assert_eq!(s.len(), 1);
        assert!(s.contains(42) && !s.contains(43));
    }

    #[test]
    fn zero_is_stored_as_one() {
        let mut s = FpSet::with_capacity(8);
        assert!(s.add(0));
        assert!(!s.add(1), "0 and 1 are one fingerprint");
        assert!(s.contains(0) && s.contains(1));
        assert_eq!(s.len(), 1);
    }

    /// A fingerprint whose home is slot `slot` of 8: below 2^29 a fingerprint mixes to itself,
    /// so its top bits pick the slot (2^61 per slot of 8).
    fn at(slot: u64, low: u64) -> u64 {
        (slot << 61) | low
    }

    #[test]
    fn homes_scale_to_the_size() {
        assert_eq!(home(at(3, 5), 8), 3);
        assert_eq!(home(u64::MAX >> 35, 12), 0); // below 2^29: mixes to itself, slot 0
        assert_eq!(home(1 << 63, 12), 6);
    }

    #[test]
    fn collisions_probe_linearly() {
        let mut s = FpSet::with_capacity(8);
        for fp in [at(3, 1), at(3, 2), at(3, 3)] {
            assert!(s.add(fp));
        }
        assert_eq!(s.table[3..6], [at(3, 1), at(3, 2), at(3, 3)]);
        assert!(!s.add(at(3, 3)) && s.contains(at(3, 2)) && !s.contains(at(3, 4)));
    }

    #[test]
    fn probe_wraps_around_the_end() {
        let mut s = FpSet::with_capacity(8);
        assert!(s.add(at(7, 1)) && s.add(at(7, 2)));
        assert_eq!((s.table[7], s.table[0]), (at(7, 1), at(7, 2)));
        assert!(s.contains(at(7, 2)));
    }

    #[test]
    fn grows_by_half_past_three_quarters() {
        let mut s = FpSet::with_capacity(8);
        for fp in 1..=6 {
            s.add(fp);
        }
        assert_eq!(s.nbytes(), 64, "6 of 8 is the limit, not past it");
        s.add(7);
        assert_eq!((s.nbytes(), s.len()), (96, 7));
        assert!((1..=7).all(|fp| s.contains(fp)) && !s.contains(8));
        let mut one = FpSet::with_capacity(1);
        assert!(one.add(5) && one.add(6));
        assert_eq!(one.table.len(), 3);
    }

    #[test]
    fn many_random_fingerprints_agree_with_a_hash_set() {
        let mut s = FpSet::with_capacity(1);
        let mut seen = std::collections::HashSet::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            // xorshift64; every fourth value is repeated from a small range, to exercise duplicates.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let fp = if x % 4 == 0 { x % 1000 } else { x };
            assert_eq!(s.add(fp), seen.insert(if fp == 0 { 1 } else { fp }));
        }
        assert_eq!(s.len(), seen.len());
        assert!(s.len() * 4 <= s.table.len() * 3);
    }

    #[test]
    fn a_map_keeps_the_last_value_put_through_its_growth() {
        let mut m = FpMap::with_capacity(1);
        let fp = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for i in 0..1000u64 {
            m.put(fp(i), i as u32);
        }
        m.put(fp(5), 7);
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(fp(5)), Some(7));
        assert_eq!(m.get(fp(999)), Some(999));
        assert_eq!(m.get(0), Some(0), "0 is stored as 1");
        assert_eq!(m.get(1), Some(0));
        assert_eq!(m.get(3), None);
        assert!(m.len() * 4 <= m.set.table.len() * 3);
    }

    #[test]
    fn keys_are_ordered_as_python_orders_bytes() {
        let keys = [0u8, 2, 0, 1, 255, 0, 0, 1];
        assert_eq!(key_order(&keys, 2), [1, 3, 0, 2]);
        assert_eq!(key_order(&[], 0), Vec::<u32>::new());
    }

    #[test]
    fn load_limit_is_pythons_int_of_three_quarters() {
        for (capacity, limit) in [
            (1, 0),
            (2, 1),
            (3, 2),
            (4, 3),
            (8, 6),
            (12, 9),
            (1 << 16, 49152),
        ] {
            assert_eq!(load_limit(capacity), limit);
        }
    }

    #[test]
    #[should_panic(expected = "at least one slot")]
    fn capacity_must_be_a_slot_or_more() {
        FpSet::with_capacity(0);
    }
}
