//! A `--workers` part on the core (checker/engines/workers.py): the level this worker keeps, its
//! own successors and those its peers send, each state under its smallest path key, and the
//! parcels for its peers. A successor whose verdicts the core knows is routed here and never
//! crosses into Python; Python routes the others after testing them (`route`).

use crate::bytes;
use crate::visited::{FpMap, key_order};

/// States by fingerprint: each one's path key (one length a level), its components' serial
/// numbers and the id of the state invariant it breaks (0: none; Python holds the table).
/// A key is given and read as checker/store/keys.py writes it, 2 bytes a step, but held at
/// one byte a step (the low bytes) while no step of the level's keys is past 255: the same
/// order, half the bytes; the first larger step widens the whole level.
pub struct Level {
    pub fps: Vec<u64>,
    keys: Vec<u8>,
    length: usize,
    narrow: bool,
    pub serials: Vec<u32>,
    pub bad: Vec<u32>,
    width: usize,
    index: FpMap,
    held: Vec<u8>,
}

impl Level {
    pub fn new(width: usize) -> Self {
        Level {
            fps: Vec::new(),
            keys: Vec::new(),
            length: 0,
            narrow: true,
            serials: Vec::new(),
            bad: Vec::new(),
            width,
            index: FpMap::with_capacity(1 << 12),
            held: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.fps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fps.is_empty()
    }

    fn held_key(&self, i: usize) -> &[u8] {
        &self.keys[i * self.length..(i + 1) * self.length]
    }

    /// State i's path key, 2 bytes a step.
    pub fn key(&self, i: usize) -> Vec<u8> {
        let held = self.held_key(i);
        if self.narrow {
            held.iter().flat_map(|&b| [0, b]).collect()
        } else {
            held.to_vec()
        }
    }

    /// Hold every key at 2 bytes a step from now on.
    fn widen(&mut self) {
        self.keys = self.keys.iter().flat_map(|&b| [0, b]).collect();
        self.length *= 2;
        self.narrow = false;
    }

    /// `key` (2 bytes a step) as the level holds it, in `held`; the level widened first if it
    /// must be.
    fn hold(&mut self, key: &[u8]) -> Result<(), String> {
        if key.len() % 2 == 1 {
            return Err(format!("a path key of {} bytes: 2 a step", key.len()));
        }
        if self.narrow && key.chunks_exact(2).any(|step| step[0] != 0) {
            self.widen();
        }
        self.held.clear();
        if self.narrow {
            self.held.extend(key.chunks_exact(2).map(|step| step[1]));
        } else {
            self.held.extend_from_slice(key);
        }
        Ok(())
    }

    pub fn comps(&self, i: usize) -> &[u32] {
        &self.serials[i * self.width..(i + 1) * self.width]
    }

    /// Keep a state: added if new, written over if held under a larger key; false when it
    /// was held under a smaller one. A level's keys all have one length.
    pub fn offer(&mut self, fp: u64, key: &[u8], comps: &[u32], bad: u32) -> Result<bool, String> {
        self.hold(key)?;
        if self.fps.is_empty() {
            self.length = self.held.len();
        } else if self.held.len() != self.length {
            return Err(format!(
                "path keys of one level differ in length: {} and {} bytes held",
                self.held.len(),
                self.length
            ));
        }
        match self.index.get(fp) {
            None => {
                self.index.put(fp, self.fps.len() as u32);
                self.fps.push(fp);
                self.keys.extend_from_slice(&self.held);
                self.serials.extend_from_slice(comps);
                self.bad.push(bad);
                Ok(true)
            }
            Some(i) if self.held[..] < *self.held_key(i as usize) => {
                let i = i as usize;
                let (l, w) = (self.length, self.width);
                self.keys[i * l..(i + 1) * l].copy_from_slice(&self.held);
                self.serials[i * w..(i + 1) * w].copy_from_slice(comps);
                self.bad[i] = bad;
                Ok(true)
            }
            Some(_) => Ok(false),
        }
    }

    pub fn nbytes(&self) -> usize {
        bytes::of_vec(&self.fps)
            + bytes::of_vec(&self.keys)
            + bytes::of_vec(&self.serials)
            + bytes::of_vec(&self.bad)
            + self.index.nbytes()
    }

    pub fn contains(&self, fp: u64) -> bool {
        self.index.get(fp).is_some()
    }

    /// Positions, smallest key first.
    pub fn order(&self) -> Vec<u32> {
        key_order(&self.keys, self.length)
    }
}

/// What one peer is sent at the end of a level: per state its fingerprint then its
/// components' fingerprints, the path keys end to end, (index, bad id) of the states that
/// break an invariant, and the components it has not been sent before (serial numbers).
#[derive(Default)]
pub struct Parcel {
    pub fps: Vec<u64>,
    pub keys: Vec<u8>,
    pub bad: Vec<(u32, u32)>,
    pub ship: Vec<u32>,
    /// Per serial number: shipped to this peer already.
    sent: Vec<bool>,
}

impl Parcel {
    pub fn nbytes(&self) -> usize {
        bytes::of_vec(&self.fps)
            + bytes::of_vec(&self.keys)
            + bytes::of_vec(&self.bad)
            + bytes::of_vec(&self.ship)
            + bytes::of_vec(&self.sent)
    }

    pub fn states(&self, width: usize) -> usize {
        self.fps.len() / (width + 1)
    }
}

/// The routing of one worker's successors, and its levels.
pub struct Part {
    pub me: usize,
    pub peers: usize,
    width: usize,
    pub mine: Level,
    pub frontier: Level,
    order: Vec<u32>,
    at: usize,
    pub out: Vec<Parcel>,
    /// Per controller serial number: the worker that owns its states (-1: not asked yet).
    pub owners: Vec<i32>,
    /// The path key of the state being expanded, and of the successor being routed.
    pub key: Vec<u8>,
    child: Vec<u8>,
}

impl Part {
    pub fn new(me: usize, peers: usize, width: usize) -> Self {
        Part {
            me,
            peers,
            width,
            mine: Level::new(width),
            frontier: Level::new(width),
            order: Vec::new(),
            at: 0,
            out: (0..peers).map(|_| Parcel::default()).collect(),
            owners: Vec::new(),
            key: Vec::new(),
            child: Vec::new(),
        }
    }

    /// (the level kept, the frontier, the parcels) in claimed bytes.
    pub fn nbytes(&self) -> (usize, usize, usize) {
        let parcels = self.out.iter().map(Parcel::nbytes).sum();
        (
            self.mine.nbytes(),
            self.frontier.nbytes() + bytes::of_vec(&self.order),
            parcels,
        )
    }

    pub fn owner(&self, controller: u32) -> Option<usize> {
        match self.owners.get(controller as usize) {
            Some(&o) if o >= 0 => Some(o as usize),
            _ => None,
        }
    }

    pub fn set_owner(&mut self, controller: u32, owner: usize) {
        let c = controller as usize;
        if self.owners.len() <= c {
            self.owners.resize(c + 1, -1);
        }
        self.owners[c] = owner as i32;
    }

    /// Put the key of successor `index` of the state being expanded in `child` (2 bytes a
    /// step, big-endian: checker/store/keys.py index_bytes); one buffer, refilled per state.
    fn child_key(&mut self, index: i64) -> Result<(), String> {
        if !(0..0xFFFF).contains(&index) {
            return Err(format!(
                "successor index {index}: path keys store indices in 2 bytes"
            ));
        }
        self.child.clear();
        self.child.extend_from_slice(&self.key);
        self.child.extend_from_slice(&(index as u16).to_be_bytes());
        Ok(())
    }

    /// Successor `index` of the state being expanded goes to its owner: kept here (it is new:
    /// the visited set said so) or put in that peer's parcel with its components'
    /// fingerprints (`comp_fp`, by serial).
    pub fn route(
        &mut self,
        owner: usize,
        fp: u64,
        index: i64,
        comps: &[u32],
        bad: u32,
        comp_fp: &[u64],
    ) -> Result<(), String> {
        self.child_key(index)?;
        let key = &self.child;
        if owner == self.me {
            self.mine.offer(fp, key, comps, bad)?;
            return Ok(());
        }
        let p = &mut self.out[owner];
        if bad != 0 {
            p.bad.push((p.states(self.width) as u32, bad));
        }
        p.fps.push(fp);
        for &s in comps {
            let s_ = s as usize;
            if p.sent.len() <= s_ {
                p.sent.resize(s_ + 1, false);
            }
            if !p.sent[s_] {
                p.sent[s_] = true;
                p.ship.push(s);
            }
            p.fps.push(comp_fp[s_]);
        }
        p.keys.extend_from_slice(key);
        Ok(())
    }

    /// Peer `peer`'s parcel, emptied: (components to ship, the fingerprints as bytes, the
    /// keys, the broken).
    #[allow(clippy::type_complexity)]
    pub fn take_parcel(&mut self, peer: usize) -> (Vec<u32>, Vec<u8>, Vec<u8>, Vec<(u32, u32)>) {
        let p = &mut self.out[peer];
        let fps = p.fps.iter().flat_map(|f| f.to_le_bytes()).collect();
        p.fps.clear();
        (
            std::mem::take(&mut p.ship),
            fps,
            std::mem::take(&mut p.keys),
            std::mem::take(&mut p.bad),
        )
    }

    /// The level just kept becomes the frontier, in key order; a new level starts empty. The
    /// frontier is only read in order, so its index goes (about a fifth of its bytes).
    pub fn start_level(&mut self) {
        self.frontier = std::mem::replace(&mut self.mine, Level::new(self.width));
        self.frontier.index = FpMap::with_capacity(1);
        self.order = self.frontier.order();
        self.at = 0;
    }

    /// The next state of the frontier, in key order: (its fingerprint, its components).
    pub fn take(&mut self) -> Option<(u64, Vec<u32>)> {
        let i = *self.order.get(self.at)? as usize;
        self.at += 1;
        self.key = self.frontier.key(i);
        Some((self.frontier.fps[i], self.frontier.comps(i).to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_keeps_each_state_under_its_smallest_key() {
        let mut l = Level::new(2);
        assert_eq!(l.offer(7, b"\x00\x02", &[1, 2], 0), Ok(true));
        assert_eq!(l.offer(9, b"\x00\x01", &[3, 4], 0), Ok(true));
        assert_eq!(
            l.offer(7, b"\x00\x03", &[5, 6], 1),
            Ok(false),
            "a larger key"
        );
        assert_eq!(
            l.offer(7, b"\x00\x00", &[5, 6], 1),
            Ok(true),
            "a smaller one"
        );
        assert_eq!(
            (l.len(), l.key(0), l.comps(0), l.bad[0]),
            (2, b"\x00\x00".to_vec(), &[5, 6][..], 1)
        );
        assert_eq!(l.order(), [0, 1]);
        assert!(l.offer(8, b"\x00", &[1, 1], 0).is_err());
    }

    #[test]
    fn a_level_holds_a_byte_a_step_until_a_step_passes_255() {
        let mut l = Level::new(1);
        l.offer(1, &[0, 9, 0, 2], &[1], 0).unwrap();
        l.offer(2, &[0, 9, 0, 1], &[2], 0).unwrap();
        assert_eq!(
            (l.keys.len(), l.key(0)),
            (4, vec![0, 9, 0, 2]),
            "one byte a step"
        );
        l.offer(3, &[0, 9, 1, 0], &[3], 0).unwrap(); // step 256
        assert_eq!(l.keys.len(), 12, "widened: two bytes a step");
        assert_eq!((l.key(0), l.key(2)), (vec![0, 9, 0, 2], vec![0, 9, 1, 0]));
        assert_eq!(l.order(), [1, 0, 2], "the order of the keys as given");
        assert_eq!(
            l.offer(3, &[0, 9, 0, 0], &[4], 0),
            Ok(true),
            "a smaller key, narrow"
        );
        assert_eq!(l.order(), [2, 1, 0]);
        assert!(l.offer(4, &[0, 9, 0], &[5], 0).is_err(), "an odd length");
    }

    #[test]
    fn a_parcel_ships_each_component_once_and_notes_the_broken() {
        let mut p = Part::new(0, 2, 2);
        let fps = [100, 101, 102, 103];
        p.key = vec![0, 1];
        p.route(1, 55, 3, &[1, 2], 0, &fps).unwrap();
        p.route(1, 56, 3, &[1, 3], 4, &fps).unwrap();
        p.route(0, 57, 3, &[0, 3], 0, &fps).unwrap();
        let k = p.mine.key(0);
        assert_eq!(k, [0, 1, 0, 3]);
        assert_eq!(p.out[1].keys, [0, 1, 0, 3, 0, 1, 0, 3]);
        let out = &p.out[1];
        assert_eq!(out.fps, [55, 101, 102, 56, 101, 103]);
        assert_eq!(out.ship, [1, 2, 3]);
        assert_eq!(out.bad, [(1, 4)]);
        assert_eq!(out.states(2), 2);
        assert_eq!(p.mine.len(), 1);
        let index = p.mine.index.nbytes();
        p.start_level();
        assert_eq!(
            p.nbytes().1,
            p.frontier.nbytes() + 4,
            "its order, one position"
        );
        assert_eq!(
            p.frontier.index.nbytes(),
            12,
            "the index is gone: {index} bytes"
        );
        assert_eq!(p.take(), Some((57, vec![0, 3])));
        assert_eq!(p.key, [0, 1, 0, 3]);
        assert_eq!(p.take(), None);
        assert!(p.route(0, 58, 0xFFFF, &[0, 3], 0, &fps).is_err());
    }
}
