//! What a table holds in memory, counted from its capacity (what it has claimed, used or
//! not), so the core can say where a process's memory goes (Core.memory).

use std::collections::{HashMap, HashSet};
use std::mem::size_of;

/// A vector's claimed bytes.
pub fn of_vec<T>(v: &Vec<T>) -> usize {
    v.capacity() * size_of::<T>()
}

/// hashbrown's buckets for a capacity: a power of two at most 7/8 full, a control byte each.
fn buckets(capacity: usize) -> usize {
    if capacity == 0 {
        0
    } else {
        (capacity * 8 / 7).next_power_of_two()
    }
}

pub fn of_map<K, V, S>(m: &HashMap<K, V, S>) -> usize {
    buckets(m.capacity()) * (size_of::<(K, V)>() + 1)
}

pub fn of_set<K, S>(s: &HashSet<K, S>) -> usize {
    buckets(s.capacity()) * (size_of::<K>() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_counts_its_buckets_and_their_control_bytes() {
        let mut m: HashMap<u64, u64> = HashMap::new();
        assert_eq!(of_map(&m), 0);
        m.insert(1, 2);
        let b = buckets(m.capacity());
        assert!(b.is_power_of_two() && b * 7 / 8 >= m.capacity().min(b - 1));
        assert_eq!(of_map(&m), b * 17);
        let v: Vec<u32> = Vec::with_capacity(10);
        assert_eq!(of_vec(&v), 40);
    }
}
