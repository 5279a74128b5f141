//! The core's tables, in plain Rust: outcomes in arenas, the step caches keyed on recorded
//! positions, and the per-serial attributes the loop reads. `cargo test` runs their tests
//! without Python; src/search.rs is the loop that uses them.

use crate::bytes;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A key: the values of up to KW key parts, unused slots u32::MAX.
pub const KW: usize = 12;

#[derive(Clone, Copy, Debug, Eq)]
pub struct Key(pub [u32; KW]);

impl Key {
    pub const EMPTY: Key = Key([u32::MAX; KW]);
}

/// Compared part by part, without a branch: the compiler keeps it inline, where the array's
/// own `==` called memcmp on every probe of a table (3% of a run).
impl PartialEq for Key {
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .fold(true, |same, (a, b)| same & (a == b))
    }
}

/// Hashed as the array: equal keys (part by part) hash alike.
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl std::ops::Deref for Key {
    type Target = [u32; KW];
    fn deref(&self) -> &[u32; KW] {
        &self.0
    }
}

impl std::ops::DerefMut for Key {
    fn deref_mut(&mut self) -> &mut [u32; KW] {
        &mut self.0
    }
}
pub type Map<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// FxHash (rustc's): a multiply-rotate hash, fast on small integer keys. The keys here are
/// serial numbers the core gave out itself, so no adversary picks them.
#[derive(Default, Clone, Copy)]
pub struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    /// Eight bytes a round, as rustc-hash does: a key of u32 parts is hashed as its bytes.
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().unwrap()));
        }
        for b in words.remainder() {
            self.add(*b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

impl Fx {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// The key of `parts` at `positions`; None past KW positions (such a key is never held).
#[inline]
pub fn key_of(parts: &[u32], positions: &[u8]) -> Option<Key> {
    if positions.len() > KW {
        return None;
    }
    let mut k = Key::EMPTY;
    for (slot, &p) in k.iter_mut().zip(positions) {
        *slot = parts[p as usize];
    }
    Some(k)
}

/// Positions as a bitmask, and back (positions are below 32: 2n + 4 parts).
pub fn mask_of(positions: &[u8]) -> u32 {
    positions.iter().fold(0, |m, &p| m | 1 << p)
}

pub fn positions_of(mask: u32) -> Vec<u8> {
    (0..32u8).filter(|&i| mask & (1 << i) != 0).collect()
}

/// One successor's outcome: the components it replaces (`len` (position, serial) pairs from
/// `start` in the arena's changes), the XOR they make to the fingerprint, the bitmask of the
/// positions. Plain data: the loop copies it, never allocates for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Out {
    pub start: u32,
    pub len: u32,
    pub delta: u64,
    pub mask: u32,
}

/// An outcome as Python gives it: (changes, XOR, mask).
pub type Row = (Vec<(u8, u32)>, u64, u32);

/// A list of outcomes in the arena: (start, length).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outs(pub u32, pub u32);

/// The bit of a list's start that places it in the core's scratch arena, not the outcomes'
/// (an arena within any budget holds far fewer than 2^31 outcomes).
pub const SCRATCH: u32 = 1 << 31;

/// What a step cache holds: outcomes, or outcomes whose runs mapped brokers, with (map id,
/// positions it maps as a bitmask) per outcome at `maps` in the maps arena.
#[derive(Clone, Copy, Debug)]
pub enum Entry {
    Leaf(Outs),
    Mapped(Outs, u32),
}

/// Under a key: a value, or, for runs that read more than the cache's key, a sub-cache keyed
/// on the extra positions.
#[derive(Clone, Debug)]
pub enum Slot<V> {
    Leaf(V),
    Sub(Box<Level<V>>),
}

#[derive(Clone, Debug)]
pub struct Level<V> {
    pub positions: Vec<u8>,
    pub mask: u32,
    pub map: Map<Key, V>,
}

impl<V> Default for Level<V> {
    fn default() -> Self {
        Level {
            positions: Vec::new(),
            mask: 0,
            map: Map::default(),
        }
    }
}

/// Values keyed on the positions their runs read (as the Python StepCache): one action's
/// outcomes, or one half of a RoundTrip's (its request or response at a position past the parts).
#[derive(Clone, Debug)]
pub struct Keyed<V> {
    pub positions: Option<Vec<u8>>,
    pub mask: u32,
    pub map: Map<Key, Slot<V>>,
}

impl<V> Default for Keyed<V> {
    fn default() -> Self {
        Keyed {
            positions: None,
            mask: 0,
            map: Map::default(),
        }
    }
}

pub type StepCache = Keyed<Entry>;

impl<V> Keyed<V> {
    /// The value for these parts, looking one level down into a sub-cache.
    pub fn get(&self, parts: &[u32]) -> Option<&V> {
        self.find(parts).map(|(v, _)| v)
    }

    /// The value for these parts, and the positions it was keyed on (both levels) as a mask.
    pub fn find(&self, parts: &[u32]) -> Option<(&V, u32)> {
        let positions = self.positions.as_ref()?;
        match self.map.get(&key_of(parts, positions)?)? {
            Slot::Sub(sub) => Some((
                sub.map.get(&key_of(parts, &sub.positions)?)?,
                self.mask | sub.mask,
            )),
            Slot::Leaf(v) => Some((v, self.mask)),
        }
    }

    /// Store a value whose run was keyed by Python on `top` (the cache's key positions) and,
    /// if it read more, `extra`. A new `top` starts the cache afresh (Python's rekey); a sub-
    /// cache whose positions grow starts afresh too. Any key holding every part a run read is
    /// sound: states agreeing on those parts run the same way.
    pub fn put(&mut self, parts: &[u32], top: Vec<u8>, extra: Option<Vec<u8>>, value: V) {
        if self.positions.as_ref() != Some(&top) {
            self.map.clear();
            self.mask = mask_of(&top);
            self.positions = Some(top);
        }
        let Some(key) = key_of(parts, self.positions.as_ref().unwrap()) else {
            return;
        };
        match extra {
            None => {
                self.map.insert(key, Slot::Leaf(value));
            }
            Some(extra) => {
                let slot = self
                    .map
                    .entry(key)
                    .or_insert_with(|| Slot::Sub(Box::default()));
                if !matches!(slot, Slot::Sub(_)) {
                    *slot = Slot::Sub(Box::default());
                }
                if let Slot::Sub(sub) = slot {
                    let mut positions: Vec<u8> =
                        sub.positions.iter().chain(extra.iter()).copied().collect();
                    positions.sort_unstable();
                    positions.dedup();
                    if positions != sub.positions {
                        sub.map.clear();
                        sub.mask = mask_of(&positions);
                        sub.positions = positions;
                    }
                    if let Some(k) = key_of(parts, &sub.positions) {
                        sub.map.insert(k, value);
                    }
                }
            }
        }
    }

    /// Store a value whose run read the positions in `reads` (a mask), by the Python
    /// StepCache's own rule (checker/cache/outcomes.py StepCache.put): the key is what every
    /// run read; a run that read more goes one level down, keyed on its extra positions.
    pub fn record(&mut self, parts: &[u32], reads: u32, value: V) {
        let top = match self.positions {
            Some(_) if self.mask & reads == self.mask => self.mask,
            Some(_) => self.mask & reads,
            None => reads,
        };
        let extra = reads & !top;
        let extra = (extra != 0).then(|| positions_of(extra));
        self.put(parts, positions_of(top), extra, value);
    }

    /// Its claimed bytes, sub-caches included (crate::bytes).
    pub fn nbytes(&self) -> usize {
        let subs: usize = self
            .map
            .values()
            .map(|e| match e {
                Slot::Sub(s) => std::mem::size_of::<Level<V>>() + bytes::of_map(&s.map),
                Slot::Leaf(_) => 0,
            })
            .sum();
        bytes::of_map(&self.map) + subs
    }

    pub fn entries(&self) -> usize {
        self.map
            .values()
            .map(|e| if let Slot::Sub(s) = e { s.map.len() } else { 1 })
            .sum()
    }
}

/// The outcomes arena: every outcome the core was given (or made, applying a map), in lists,
/// and their changes.
#[derive(Default)]
pub struct Arena {
    pub outs: Vec<Out>,
    pub changes: Vec<(u8, u32)>,
    pub maps: Vec<(u32, u32)>,
}

impl Arena {
    pub fn add(&mut self, rows: Vec<Row>) -> Outs {
        let start = self.outs.len() as u32;
        let len = rows.len() as u32;
        for (changes, delta, mask) in rows {
            self.push(&changes, delta, mask);
        }
        Outs(start, len)
    }

    /// One outcome more, at the end.
    pub fn push(&mut self, changes: &[(u8, u32)], delta: u64, mask: u32) {
        let start = self.changes.len() as u32;
        self.changes.extend_from_slice(changes);
        self.outs.push(Out {
            start,
            len: changes.len() as u32,
            delta,
            mask,
        });
    }

    pub fn changes(&self, o: &Out) -> &[(u8, u32)] {
        &self.changes[o.start as usize..(o.start + o.len) as usize]
    }

    pub fn add_maps(&mut self, maps: Vec<(u32, u32)>) -> u32 {
        let start = self.maps.len() as u32;
        self.maps.extend(maps);
        start
    }

    pub fn get(&self, o: Outs) -> &[Out] {
        &self.outs[o.0 as usize..(o.0 + o.1) as usize]
    }

    pub fn nbytes(&self) -> usize {
        bytes::of_vec(&self.outs) + bytes::of_vec(&self.changes) + bytes::of_vec(&self.maps)
    }

    /// The bytes its lists fill (a list emptied keeps its capacity, which refills first).
    pub fn used(&self) -> usize {
        use std::mem::size_of;
        self.outs.len() * size_of::<Out>()
            + self.changes.len() * size_of::<(u8, u32)>()
            + self.maps.len() * size_of::<(u32, u32)>()
    }

    /// Drop every list: the caches that point into it must be emptied with it.
    pub fn clear(&mut self) {
        self.outs.clear();
        self.changes.clear();
        self.maps.clear();
    }
}

/// What the loop reads of a component, by serial number: a broker's (or the controller's)
/// leader, whether a broker is alive and stalled, and its applied epoch (spec/state.py
/// Broker.applied), the last two a key part each.
#[derive(Default)]
pub struct Attributes {
    pub leader: Vec<i32>,
    pub alive: Vec<bool>,
    pub stalled: Vec<bool>,
    pub applied: Vec<u32>,
}

impl Attributes {
    pub fn set(&mut self, serial: u32, leader: i32, alive: bool, stalled: bool, applied: u32) {
        let s = serial as usize;
        if self.leader.len() <= s {
            self.leader.resize(s + 1, -1);
            self.alive.resize(s + 1, false);
            self.stalled.resize(s + 1, false);
            self.applied.resize(s + 1, 0);
        }
        self.leader[s] = leader;
        self.alive[s] = alive;
        self.stalled[s] = stalled;
        self.applied[s] = applied;
    }

    /// Broker component `serial` at position `b` serves reads: alive and leading on its metadata.
    #[inline]
    pub fn serves(&self, serial: u32, b: usize) -> bool {
        let s = serial as usize;
        self.alive[s] && self.leader[s] == b as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(d: u64) -> Row {
        (vec![(1, d as u32)], d, 2)
    }

    #[test]
    fn a_cache_finds_what_it_stored_on_its_positions_only() {
        let mut arena = Arena::default();
        let mut c = StepCache::default();
        let o = arena.add(vec![out(7)]);
        c.put(&[5, 6, 7, 8], vec![0, 2], None, Entry::Leaf(o));
        assert!(matches!(c.get(&[5, 99, 7, 100]), Some(Entry::Leaf(x)) if *x == o));
        assert!(c.get(&[5, 6, 8, 8]).is_none());
        assert_eq!(arena.get(o)[0].delta, 7);
        assert_eq!(arena.changes(&arena.get(o)[0]), [(1, 7)]);
    }

    #[test]
    fn new_positions_start_the_cache_afresh() {
        let mut c = StepCache::default();
        c.put(&[1, 2, 3], vec![0, 1], None, Entry::Leaf(Outs(0, 1)));
        c.put(&[1, 2, 3], vec![0], None, Entry::Leaf(Outs(1, 1)));
        assert_eq!(c.entries(), 1);
        assert!(matches!(c.get(&[1, 9, 9]), Some(Entry::Leaf(Outs(1, 1)))));
    }

    #[test]
    fn a_run_that_read_more_goes_one_level_down_and_its_positions_grow() {
        let mut c = StepCache::default();
        c.put(
            &[1, 2, 3, 4],
            vec![0],
            Some(vec![2]),
            Entry::Leaf(Outs(0, 1)),
        );
        assert!(matches!(
            c.get(&[1, 0, 3, 0]),
            Some(Entry::Leaf(Outs(0, 1)))
        ));
        assert!(c.get(&[1, 0, 4, 0]).is_none());
        // Another run under the same key read position 3 too: the sub-cache keys on 2 and 3.
        c.put(
            &[1, 2, 5, 6],
            vec![0],
            Some(vec![3]),
            Entry::Leaf(Outs(1, 1)),
        );
        assert!(c.get(&[1, 0, 3, 0]).is_none());
        assert!(matches!(
            c.get(&[1, 0, 5, 6]),
            Some(Entry::Leaf(Outs(1, 1)))
        ));
        assert!(c.get(&[1, 0, 5, 7]).is_none());
    }

    #[test]
    fn a_recorded_run_keys_on_what_every_run_read_and_goes_down_for_the_rest() {
        let mut c: Keyed<u32> = Keyed::default();
        c.record(&[1, 2, 3, 4], 0b0011, 7);
        assert_eq!(c.find(&[1, 2, 9, 9]), Some((&7, 0b0011)));
        // A run that read position 2 too: the key stays {0, 1}, the run goes one level down.
        c.record(&[1, 5, 3, 4], 0b0111, 8);
        assert_eq!(c.find(&[1, 5, 3, 0]), Some((&8, 0b0111)));
        assert_eq!(c.find(&[1, 5, 4, 0]), None);
        assert_eq!(c.find(&[1, 2, 9, 9]), Some((&7, 0b0011)));
        // A run that read less (position 0 only): the key shrinks, and the cache starts afresh.
        c.record(&[6, 0, 0, 0], 0b0001, 9);
        assert_eq!(c.positions, Some(vec![0]));
        assert_eq!(c.entries(), 1);
        assert_eq!(c.find(&[6, 1, 1, 1]), Some((&9, 0b0001)));
    }

    #[test]
    fn the_hash_reads_every_part_of_a_key_eight_bytes_a_round() {
        use std::hash::BuildHasher;
        let h = BuildHasherDefault::<Fx>::default();
        let k = Key([7; KW]);
        assert_eq!(h.hash_one(k), h.hash_one([7u32; KW]));
        for i in 0..KW {
            let mut other = k;
            other[i] = 8;
            assert_ne!(h.hash_one(k), h.hash_one(other), "part {i}");
        }
        // A tail shorter than a word is read too.
        assert_ne!(h.hash_one([1u8, 2, 3]), h.hash_one([1u8, 2, 4]));
    }

    #[test]
    fn keys_hold_only_the_named_positions() {
        assert_eq!(
            key_of(&[10, 11, 12], &[2, 0]).unwrap()[..3],
            [12, 10, u32::MAX]
        );
        assert!(key_of(&[0; 16], &[0; KW + 1]).is_none());
    }

    #[test]
    fn a_broker_serves_when_alive_and_leading_at_its_position() {
        let mut a = Attributes::default();
        a.set(3, 2, true, false, 5);
        a.set(4, 2, false, true, 0);
        assert!(a.serves(3, 2));
        assert!(!a.serves(3, 1));
        assert!(!a.serves(4, 2));
        assert!(a.stalled[4]);
        assert_eq!(a.applied[..5], [0, 0, 0, 5, 0]);
    }
}
