//! A raw DEFLATE (RFC 1951) decoder for the embedded SPIR-V, which `build.rs` deflates: the
//! kernels' unrolled code shrinks to about a third, and the library takes no crate for it. It
//! decodes bit by bit along canonical Huffman codes (as zlib's `puff` does): simple, and fast
//! enough for the few megabytes a process decodes once.

/// Longest Huffman code DEFLATE allows.
const MAX_BITS: usize = 15;

/// The stream's bits, least significant first.
struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    buf: u32,
    count: u32,
}

impl Bits<'_> {
    /// The next `need` bits (0 to 16), or an error past the end.
    fn take(&mut self, need: u32) -> Result<u32, &'static str> {
        while self.count < need {
            let byte = *self.data.get(self.pos).ok_or("the stream ends early")?;
            self.buf |= u32::from(byte) << self.count;
            self.pos += 1;
            self.count += 8;
        }
        let value = self.buf & ((1u32 << need) - 1);
        self.buf >>= need;
        self.count -= need;
        Ok(value)
    }
}

/// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct Huffman {
    count: [u16; MAX_BITS + 1],
    symbol: Vec<u16>,
}

impl Huffman {
    /// The code of these code lengths (0: the symbol is unused). An over-subscribed set is an
    /// error; an incomplete one is allowed (a lone distance code, say) and fails only if a
    /// missing code is read.
    fn new(lengths: &[u8]) -> Result<Huffman, &'static str> {
        let mut count = [0u16; MAX_BITS + 1];
        for &l in lengths {
            count[usize::from(l)] += 1;
        }
        let mut left: i32 = 1;
        for &c in &count[1..] {
            left = 2 * left - i32::from(c);
            if left < 0 {
                return Err("an over-subscribed Huffman code");
            }
        }
        let mut offsets = [0u16; MAX_BITS + 2];
        for len in 1..=MAX_BITS {
            offsets[len + 1] = offsets[len] + count[len];
        }
        let mut symbol = vec![0u16; usize::from(offsets[MAX_BITS + 1])];
        for (s, &l) in lengths.iter().enumerate() {
            if l != 0 {
                symbol[usize::from(offsets[usize::from(l)])] = s as u16;
                offsets[usize::from(l)] += 1;
            }
        }
        count[0] = 0;
        Ok(Huffman { count, symbol })
    }

    /// The next symbol: codes are read most significant bit first.
    fn decode(&self, bits: &mut Bits) -> Result<u16, &'static str> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..=MAX_BITS {
            code |= bits.take(1)? as i32;
            let count = i32::from(self.count[len]);
            if code - count < first {
                return Ok(self.symbol[(index + code - first) as usize]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err("a code that the Huffman table lacks")
    }
}

const LENGTH_BASE: [u16; 29] =
    [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LENGTH_EXTRA: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145,
    8193, 12289, 16385, 24577,
];
const DISTANCE_EXTRA: [u8; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
/// The order in which a dynamic block sends its code-length code's lengths.
const CODE_LENGTH_ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/// Decodes a raw DEFLATE stream (no zlib or gzip header) that holds `expected` bytes; any
/// malformed stream, or one of another length, is an error.
pub(crate) fn inflate(data: &[u8], expected: usize) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(expected);
    let mut bits = Bits { data, pos: 0, buf: 0, count: 0 };
    loop {
        let last = bits.take(1)? == 1;
        match bits.take(2)? {
            0 => stored(&mut bits, &mut out)?,
            1 => {
                let mut lengths = [0u8; 288];
                lengths[..144].fill(8);
                lengths[144..256].fill(9);
                lengths[256..280].fill(7);
                lengths[280..].fill(8);
                codes(&mut bits, &mut out, &Huffman::new(&lengths)?, &Huffman::new(&[5; 30])?)?;
            }
            2 => {
                let (literals, distances) = dynamic_tables(&mut bits)?;
                codes(&mut bits, &mut out, &literals, &distances)?;
            }
            _ => return Err("a block of the reserved type"),
        }
        if out.len() > expected {
            return Err("the stream holds more than it should");
        }
        if last {
            break;
        }
    }
    if out.len() != expected {
        return Err("the stream holds less than it should");
    }
    Ok(out)
}

/// A stored block: byte-aligned length, its complement, the bytes.
fn stored(bits: &mut Bits, out: &mut Vec<u8>) -> Result<(), &'static str> {
    bits.buf = 0;
    bits.count = 0;
    let header = bits.data.get(bits.pos..bits.pos + 4).ok_or("the stream ends early")?;
    let len = usize::from(u16::from_le_bytes([header[0], header[1]]));
    if u16::from_le_bytes([header[2], header[3]]) != !(len as u16) {
        return Err("a stored block's length does not match its complement");
    }
    bits.pos += 4;
    out.extend_from_slice(bits.data.get(bits.pos..bits.pos + len).ok_or("the stream ends early")?);
    bits.pos += len;
    Ok(())
}

/// A dynamic block's literal/length and distance codes.
fn dynamic_tables(bits: &mut Bits) -> Result<(Huffman, Huffman), &'static str> {
    let literals = bits.take(5)? as usize + 257;
    let distances = bits.take(5)? as usize + 1;
    let code_lengths = bits.take(4)? as usize + 4;
    if literals > 286 || distances > 30 {
        return Err("too many codes in a dynamic block");
    }
    let mut lengths = [0u8; 19];
    for &i in &CODE_LENGTH_ORDER[..code_lengths] {
        lengths[i] = bits.take(3)? as u8;
    }
    let code = Huffman::new(&lengths)?;
    let mut lengths = vec![0u8; literals + distances];
    let mut i = 0;
    while i < lengths.len() {
        let symbol = code.decode(bits)?;
        let (value, repeat) = match symbol {
            0..=15 => (symbol as u8, 1),
            16 => (*lengths[..i].last().ok_or("a repeat with nothing before it")?, 3 + bits.take(2)? as usize),
            17 => (0, 3 + bits.take(3)? as usize),
            _ => (0, 11 + bits.take(7)? as usize),
        };
        let end = i.checked_add(repeat).filter(|&e| e <= lengths.len()).ok_or("code lengths run past the codes")?;
        lengths[i..end].fill(value);
        i = end;
    }
    if lengths[256] == 0 {
        return Err("a dynamic block without an end-of-block code");
    }
    Ok((Huffman::new(&lengths[..literals])?, Huffman::new(&lengths[literals..])?))
}

/// The literals and copies of a Huffman-coded block, up to its end-of-block code.
fn codes(bits: &mut Bits, out: &mut Vec<u8>, literals: &Huffman, distances: &Huffman) -> Result<(), &'static str> {
    loop {
        let symbol = usize::from(literals.decode(bits)?);
        match symbol {
            0..=255 => out.push(symbol as u8),
            256 => return Ok(()),
            _ => {
                let at = symbol - 257;
                let length = usize::from(*LENGTH_BASE.get(at).ok_or("an invalid length code")?)
                    + bits.take(u32::from(LENGTH_EXTRA[at]))? as usize;
                let d = usize::from(distances.decode(bits)?);
                let distance = usize::from(*DISTANCE_BASE.get(d).ok_or("an invalid distance code")?)
                    + bits.take(u32::from(DISTANCE_EXTRA[d]))? as usize;
                let from = out.len().checked_sub(distance).ok_or("a copy from before the start")?;
                for k in 0..length {
                    let byte = out[from + k];
                    out.push(byte);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inflate;

    /// Data with both long repeats and noise, like SPIR-V's.
    fn sample(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed | 1;
        let mut data = Vec::with_capacity(n);
        while data.len() < n {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            if x % 3 == 0 && data.len() > 64 {
                let back = (x as usize >> 8) % data.len().min(40_000) + 1;
                let from = data.len() - back;
                for k in 0..(x as usize >> 4) % 300 {
                    data.push(data[from + k % back]);
                }
            } else {
                data.extend_from_slice(&x.to_le_bytes()[..(x as usize >> 20) % 4 + 1]);
            }
        }
        data.truncate(n);
        data
    }

    #[test]
    fn decodes_what_miniz_encodes_at_every_level() {
        for (n, seed) in [(0, 1), (1, 2), (100, 3), (70_000, 4), (300_000, 5)] {
            let data = sample(n, seed);
            // Level 0 makes stored blocks, 1 fixed codes for short inputs, the others dynamic ones.
            for level in [0, 1, 6, 10] {
                let deflated = miniz_oxide::deflate::compress_to_vec(&data, level);
                assert_eq!(inflate(&deflated, data.len()).as_deref(), Ok(&data[..]), "n={n} level {level}");
            }
        }
    }

    #[test]
    fn rejects_damaged_and_wrong_length_streams_without_panicking() {
        let data = sample(50_000, 7);
        let deflated = miniz_oxide::deflate::compress_to_vec(&data, 9);
        assert!(inflate(&deflated, data.len() + 1).is_err());
        assert!(inflate(&deflated, data.len() - 1).is_err());
        assert!(inflate(&deflated[..deflated.len() / 2], data.len()).is_err());
        assert!(inflate(&[], 0).is_err());
        // Every single-byte change either fails or decodes to something: it never panics.
        for i in (0..deflated.len()).step_by(97) {
            let mut damaged = deflated.clone();
            damaged[i] ^= 0x5a;
            let _ = inflate(&damaged, data.len());
        }
    }
}
