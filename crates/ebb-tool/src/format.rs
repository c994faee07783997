//! How the tool reads keys and values from its command line and prints them
//! (ldb's conventions; docs/ebb-tool.md, "Keys and values").
//!
//! - Text: input bytes are the argument's UTF-8 bytes, with each `\xNN`
//!   (two hex digits, either case) the byte it names; on output every byte
//!   that is not printable ASCII, and the backslash itself, is `\xNN`
//!   (uppercase digits), so a printed key pasted back names the same bytes.
//! - Hex (`--hex` for both sides, `--key_hex` or `--value_hex` for one):
//!   input is pairs of hex digits, `0x` optional; output is `0x` and
//!   uppercase digits, as ldb prints them.

use std::fmt::Write as _;

use clap::Args;
use ebb::internals::key::ValueKind;

/// The encoding flags every verb that reads or prints keys takes.
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct Encoding {
    /// Keys and values are hex, on input and output (`0x` optional on
    /// input; printed as `0x` and uppercase digits), as ldb's --hex.
    #[arg(long)]
    pub hex: bool,
    /// Keys (and key bounds) alone are hex.
    #[arg(long = "key_hex")]
    pub key_hex: bool,
    /// Values alone are hex.
    #[arg(long = "value_hex")]
    pub value_hex: bool,
}

impl Encoding {
    fn keys_hex(&self) -> bool {
        self.hex || self.key_hex
    }

    fn values_hex(&self) -> bool {
        self.hex || self.value_hex
    }

    /// The key given as `what` on the command line (`"KEY"`, `"--from"`).
    pub fn parse_key(&self, what: &str, arg: &str) -> ebb::Result<Vec<u8>> {
        parse(self.keys_hex(), what, arg)
    }

    /// The value given as `what` on the command line.
    pub fn parse_value(&self, what: &str, arg: &str) -> ebb::Result<Vec<u8>> {
        parse(self.values_hex(), what, arg)
    }

    /// A key as printed.
    pub fn key(&self, bytes: &[u8]) -> String {
        show(self.keys_hex(), bytes)
    }

    /// A value as printed.
    pub fn value(&self, bytes: &[u8]) -> String {
        show(self.values_hex(), bytes)
    }

    /// A stored value of kind `kind` as printed: a wide-column entity's
    /// columns as `NAME:VALUE` separated by spaces (ldb's form; the default
    /// column's name is empty), any other value as [`Self::value`].
    pub fn stored_value(&self, kind: ValueKind, bytes: &[u8]) -> String {
        match (kind, ebb::wide_columns::decode_entity(bytes)) {
            (ValueKind::WideColumnEntity, Ok(columns)) => columns
                .iter()
                .map(|c| format!("{}:{}", self.value(&c.name), self.value(&c.value)))
                .collect::<Vec<_>>()
                .join(" "),
            _ => self.value(bytes),
        }
    }

    /// An internal key as printed: `KEY @ SEQ : TYPE`, or the raw bytes
    /// marked as such when they do not parse as an internal key.
    pub fn internal_key(&self, ikey: &[u8]) -> String {
        match ebb::internals::key::parse_internal_key(ikey) {
            Some(p) => format!("{} @ {} : {}", self.key(p.user_key), p.seq, kind_name(p.kind)),
            None => format!("{} (not an internal key)", self.key(ikey)),
        }
    }
}

fn parse(hex: bool, what: &str, arg: &str) -> ebb::Result<Vec<u8>> {
    if !hex {
        return Ok(unescape(arg));
    }
    let digits = arg.strip_prefix("0x").or_else(|| arg.strip_prefix("0X")).unwrap_or(arg);
    if !digits.len().is_multiple_of(2) {
        return Err(ebb::Error::invalid(format!("{what} {arg:?} is not hex: an odd number of digits")));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| digits.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| ebb::Error::invalid(format!("{what} {arg:?} is not hex")))
}

/// `arg`'s bytes with every `\xNN` replaced by the byte it names (what
/// [`show`] prints a byte as); a backslash not followed by `x` and two hex
/// digits stays itself.
fn unescape(arg: &str) -> Vec<u8> {
    let bytes = arg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 4) {
            Some([b'\\', b'x', hi, lo]) if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                Some(hex_digit(*hi) << 4 | hex_digit(*lo))
            }
            _ => None,
        };
        match escaped {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

/// The value of an ASCII hex digit (either case).
fn hex_digit(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        _ => d - b'A' + 10,
    }
}

fn show(hex: bool, bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + bytes.len() * 2);
    if hex {
        s.push_str("0x");
        for b in bytes {
            let _ = write!(s, "{b:02X}");
        }
    } else {
        for &b in bytes {
            if (b.is_ascii_graphic() && b != b'\\') || b == b' ' {
                s.push(char::from(b));
            } else {
                let _ = write!(s, "\\x{b:02X}");
            }
        }
    }
    s
}

/// The name an entry's kind is printed with: the names `ebb::EntryType`
/// displays, and `range_delete` for a range tombstone.
pub fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Value => "put",
        ValueKind::Deletion => "delete",
        ValueKind::SingleDeletion => "single_delete",
        ValueKind::Merge => "merge",
        ValueKind::RangeDeletion => "range_delete",
        ValueKind::BlobIndex => "blob_index",
        ValueKind::WideColumnEntity => "wide_column_entity",
    }
}

/// The error for a failed write to standard output (a closed pipe).
pub fn stdout_error(e: std::io::Error) -> ebb::Error {
    ebb::Error::io("write", "standard output", e)
}

/// `writeln!` to the tool's output, a failure turned into an `ebb::Error`.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).map_err($crate::format::stdout_error)
    };
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_escapes_what_is_not_printable_and_the_backslash() {
        assert_eq!(show(false, b"a b~"), "a b~");
        assert_eq!(show(false, &[0, b'\\', 0xff, b'\n']), "\\x00\\x5C\\xFF\\x0A");
    }

    #[test]
    fn printed_text_reads_back_as_the_same_bytes() {
        let every: Vec<u8> = (0..=255).collect();
        assert_eq!(parse(false, "KEY", &show(false, &every)).unwrap(), every);
        assert_eq!(parse(false, "KEY", "\\x01a\\x5c").unwrap(), vec![1, b'a', b'\\']);
        // A backslash that starts no escape is itself.
        for literal in ["a\\b", "\\x", "\\x4", "\\x+1", "\\xg0", "end\\"] {
            assert_eq!(parse(false, "KEY", literal).unwrap(), literal.as_bytes(), "{literal}");
        }
    }

    #[test]
    fn hex_reads_with_or_without_prefix_and_prints_uppercase() {
        assert_eq!(parse(true, "KEY", "0xff00").unwrap(), vec![0xff, 0]);
        assert_eq!(parse(true, "KEY", "Ab").unwrap(), vec![0xab]);
        assert_eq!(parse(true, "KEY", "").unwrap(), Vec::<u8>::new());
        assert_eq!(show(true, &[0xab, 1]), "0xAB01");
        assert_eq!(show(true, &[]), "0x");
    }

    #[test]
    fn bad_hex_names_the_argument() {
        for bad in ["0xf", "zz", "0x1g", "é1"] {
            let e = parse(true, "--from", bad).unwrap_err().to_string();
            assert!(e.contains("--from") && e.contains("not hex"), "{e}");
        }
        assert_eq!(parse(false, "KEY", "zz").unwrap(), b"zz".to_vec());
    }
}
