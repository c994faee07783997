//! Little-endian fixed-width and LEB128 varint coding, as LevelDB's `util/coding.h`.
//!
//! Decoders never panic on short input: they return `None`, and callers turn that
//! into a corruption error naming the file and offset.

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at the start of `src`.
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

/// Reads 8 little-endian bytes at the start of `src`.
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// Appends `v` as a varint (1-5 bytes).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as a varint (1-10 bytes).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Decodes a varint32 from the start of `src`: `(value, bytes consumed)`.
#[inline]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    // One byte is the common case (lengths under 128): no loop, no call.
    if let Some(&b) = src.first() {
        if b < 0x80 {
            return Some((u32::from(b), 1));
        }
    }
    let (v, n) = decode_varint64(src)?;
    if n > 5 || v > u64::from(u32::MAX) {
        return None;
    }
    Some((v as u32, n))
}

/// Decodes a varint64 from the start of `src`: `(value, bytes consumed)`.
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    let mut result = 0u64;
    for (i, &byte) in src.iter().enumerate().take(10) {
        let shift = 7 * i as u32;
        if i == 9 && byte > 1 {
            return None;
        }
        result |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Number of bytes `v` takes as a varint.
pub fn varint_length(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends a varint32 length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, value: &[u8]) {
    put_varint32(dst, value.len() as u32);
    dst.extend_from_slice(value);
}

/// A cursor over a byte slice for decoding records field by field.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Starts decoding at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
    /// True once every byte is consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    /// Reads a fixed64.
    #[cfg(test)]
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }
    /// Reads a varint32.
    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = decode_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads a varint64.
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    /// Reads a varint32 length and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = self.varint32()? as usize;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_at_every_width() {
        let mut values = vec![0u64, 1, 127, 128, 255, 300, 16383, 16384, u64::from(u32::MAX), u64::MAX];
        for shift in 0..64 {
            values.push(1u64 << shift);
            values.push((1u64 << shift) - 1);
        }
        for v in values {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_length(v));
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
        }
    }

    #[test]
    fn truncated_and_overlong_varints_are_refused() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::MAX);
        for cut in 0..buf.len() {
            assert_eq!(decode_varint64(&buf[..cut]), None);
        }
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        let mut big = Vec::new();
        put_varint64(&mut big, u64::from(u32::MAX) + 1);
        assert_eq!(decode_varint32(&big), None);
    }

    #[test]
    fn fixed_widths_are_little_endian() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0x0403_0201);
        put_fixed64(&mut buf, 0x0807_0605_0403_0201);
        assert_eq!(&buf[..4], &[1, 2, 3, 4]);
        assert_eq!(decode_fixed64(&buf[4..]), Some(0x0807_0605_0403_0201));
        assert_eq!(decode_fixed32(&buf[..3]), None);
    }

    #[test]
    fn decoder_reads_fields_in_order() {
        let mut buf = Vec::new();
        put_varint32(&mut buf, 7);
        put_length_prefixed(&mut buf, b"key");
        put_fixed64(&mut buf, 42);
        let mut d = Decoder::new(&buf);
        assert_eq!(d.varint32(), Some(7));
        assert_eq!(d.length_prefixed(), Some(&b"key"[..]));
        assert_eq!(d.fixed64(), Some(42));
        assert!(d.is_empty());
        assert_eq!(d.u8(), None);
    }
}
