//! The POSIX `cksum` of some bytes, as that tool prints it: what a printed
//! setup script computes of a user's file with a tool every POSIX system
//! has, and `pkgproxyctl setup` of the same bytes when it prints the
//! script, so the script can tell the file is still the one it was
//! printed for.
//!
//! It is a CRC, not a cryptographic hash: it guards against a file edited
//! between the printing and the running, not against someone forging a
//! file of the user's own (who could then write the file itself).

/// The CRC's generator polynomial (POSIX, `cksum`: CRC-32, most
/// significant bit first).
const POLYNOMIAL: u32 = 0x04C1_1DB7;

/// What `cksum` prints for `bytes` read from its input: the CRC and the
/// length, `4294967295 0` for nothing.
pub fn cksum(bytes: &[u8]) -> String {
    let mut crc = bytes.iter().fold(0, |crc, byte| fed(crc, *byte));
    // Then the length, least significant byte first, as few bytes as it
    // takes.
    let mut length = bytes.len() as u64;
    while length != 0 {
        crc = fed(crc, (length & 0xFF) as u8);
        length >>= 8;
    }
    format!("{} {}", !crc, bytes.len())
}

/// `crc` with `byte` fed in.
fn fed(crc: u32, byte: u8) -> u32 {
    let mut crc = crc ^ (u32::from(byte) << 24);
    for _ in 0..8 {
        crc = if crc & 0x8000_0000 == 0 { crc << 1 } else { (crc << 1) ^ POLYNOMIAL };
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::cksum;

    #[test]
    fn it_answers_as_the_posix_tool_does() {
        // Each answer is what coreutils' cksum printed for the same bytes.
        assert_eq!(cksum(b""), "4294967295 0");
        assert_eq!(cksum(b"123456789"), "930766865 9");
        assert_eq!(cksum(b"save-exact=true\n"), "1014887790 16");
        let counting: Vec<u8> = (0..300).map(|i| (i % 256) as u8).collect();
        assert_eq!(cksum(&counting), "3300625067 300", "a length of two bytes");
        assert_eq!(cksum(&[b'a'; 70_000]), "3508083167 70000", "a length of three bytes");
    }
}
