//! Keys and values that check themselves: a value is derived from its key
//! and a value id, so it can be verified without being stored (RocksDB
//! db_stress's `GenerateValue`).
//!
//! Value layout: key index (u64 LE), value id (u64 LE), then 8 to 127 bytes
//! of payload drawn from a SplitMix64 stream seeded by both.

/// The key of index `i`; fixed width, so byte order is index order.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// The index of a key made by [`key`], `None` for anything else.
pub fn key_index(k: &[u8]) -> Option<u64> {
    let digits = k.strip_prefix(b"key")?;
    if digits.len() != 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn payload(i: u64, id: u64) -> Vec<u8> {
    let mut state = i.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ id;
    let len = 8 + (splitmix(&mut state) % 120) as usize;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The value with id `id` of key `i`.
pub fn value(i: u64, id: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + 128);
    v.extend_from_slice(&i.to_le_bytes());
    v.extend_from_slice(&id.to_le_bytes());
    v.extend_from_slice(&payload(i, id));
    v
}

/// The id of `v`, a value read for key `i`, or why it is not one `value` made.
pub fn value_id(i: u64, v: &[u8]) -> Result<u64, String> {
    if v.len() < 16 {
        return Err(format!("value of {} bytes is shorter than its header", v.len()));
    }
    let (head, rest) = v.split_at(16);
    let mut word = [0u8; 8];
    word.copy_from_slice(&head[..8]);
    let owner = u64::from_le_bytes(word);
    word.copy_from_slice(&head[8..]);
    let id = u64::from_le_bytes(word);
    if owner != i {
        return Err(format!("value belongs to key {owner}"));
    }
    if rest != payload(i, id).as_slice() {
        return Err(format!("payload of value id {id} is not the one derived from it"));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_verify_and_damage_is_caught() {
        let v = value(42, 7);
        assert_eq!(value_id(42, &v), Ok(7));
        assert!(value_id(43, &v).is_err());
        let mut bad = v.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(value_id(42, &bad).is_err());
        assert!(value_id(42, &v[..10]).is_err());
        assert_eq!(key_index(&key(123)), Some(123));
        assert_eq!(key_index(b"key123"), None);
    }
}
