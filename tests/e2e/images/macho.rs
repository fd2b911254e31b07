//! What the plugin tests ask of a macOS program, read from its Mach-O headers here (not with
//! any code under test): 64-bit, the CPU its krew platform names (`cputype`), an executable with
//! an entry point for macOS 11 or later (`LC_BUILD_VERSION`), linked only against libraries every
//! Mac has, on arm64 signed (Apple silicon runs no unsigned program; zig signs ad hoc, and every
//! page hash of the `LC_CODE_SIGNATURE` is checked against the bytes; Intel Macs need none, and
//! zig writes none there), and carrying `cargo auditable`'s dependency tree (section
//! `__DATA,.dep-v0`). Nothing here can run it: no Mac.

use sha2::{Digest as _, Sha256};

/// The libraries a macOS program of ours may load: libSystem (with its iconv) and the two
/// frameworks rustls' platform verifier calls (third_party/cross/build.sh has their link stubs).
const SYSTEM_LIBRARIES: [&str; 5] = [
    "/usr/lib/libSystem.B.dylib",
    "/usr/lib/libiconv.2.dylib",
    "/usr/lib/libcharset.1.dylib",
    "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation",
    "/System/Library/Frameworks/Security.framework/Versions/A/Security",
];

fn u32_le(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

fn u64_le(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

fn u32_be(b: &[u8], at: usize) -> usize {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

fn name(b: &[u8]) -> &str {
    std::str::from_utf8(b.split(|&c| c == 0).next().unwrap()).unwrap()
}

/// Checks every page hash of the ad-hoc signature at `dataoff`: the CodeDirectory's SHA-256 of
/// each page up to `codeLimit`, which must be where the signature starts.
fn check_signature(file: &[u8], dataoff: usize, what: &str) {
    let blob = &file[dataoff..];
    assert_eq!(
        u32_be(blob, 0),
        0xFADE_0CC0,
        "{what}: no embedded signature SuperBlob"
    );
    let count = u32_be(blob, 8);
    let cd_offset = (0..count)
        .find(|i| u32_be(blob, 12 + i * 8) == 0)
        .map(|i| u32_be(blob, 16 + i * 8))
        .unwrap_or_else(|| panic!("{what}: the signature has no CodeDirectory"));
    let cd = &blob[cd_offset..];
    assert_eq!(u32_be(cd, 0), 0xFADE_0C02, "{what}: not a CodeDirectory");
    assert_eq!(u32_be(cd, 12) & 0x2, 0x2, "{what}: not an ad-hoc signature");
    let (hash_offset, code_slots, code_limit) = (u32_be(cd, 16), u32_be(cd, 28), u32_be(cd, 32));
    let (hash_size, hash_type, page) = (cd[36] as usize, cd[37], 1usize << cd[39]);
    assert_eq!(
        (hash_size, hash_type),
        (32, 2),
        "{what}: not SHA-256 page hashes"
    );
    assert_eq!(
        code_limit, dataoff,
        "{what}: the signature does not cover the whole program"
    );
    assert_eq!(code_slots, code_limit.div_ceil(page), "{what}: page count");
    for i in 0..code_slots {
        let bytes = &file[i * page..((i + 1) * page).min(code_limit)];
        let want = &cd[hash_offset + i * hash_size..][..hash_size];
        assert_eq!(
            Sha256::digest(bytes).as_slice(),
            want,
            "{what}: page {i} does not match its signature (changed after linking?)"
        );
    }
}

/// Asserts `file` is a signed macOS executable for `arch` (`amd64` or `arm64`) that loads only
/// system libraries; returns its embedded dependency tree.
pub fn check(file: &[u8], arch: &str, what: &str) -> serde_json::Value {
    assert_eq!(
        u32_le(file, 0),
        0xFEED_FACF,
        "{what}: not a 64-bit Mach-O file"
    );
    let want = match arch {
        "amd64" => 0x0100_0007,
        "arm64" => 0x0100_000C,
        other => panic!("no Mach-O cputype known for {other}"),
    };
    assert_eq!(u32_le(file, 4), want, "{what}: cputype for another CPU");
    assert_eq!(
        u32_le(file, 12),
        2,
        "{what}: not an executable (MH_EXECUTE)"
    );
    let (mut at, commands) = (32, u32_le(file, 16));
    let (mut libraries, mut signature, mut entry, mut min_os, mut tree) =
        (Vec::new(), None, false, None, None);
    for _ in 0..commands {
        let (command, size) = (u32_le(file, at), u32_le(file, at + 4));
        match command {
            // LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB
            0xC | 0x8000_0018 | 0x8000_001F => {
                libraries.push(name(&file[at + u32_le(file, at + 8)..at + size]).to_owned());
            }
            0x1D => signature = Some(u32_le(file, at + 8)),
            0x8000_0028 => entry = true,
            0x32 => {
                assert_eq!(
                    u32_le(file, at + 8),
                    1,
                    "{what}: LC_BUILD_VERSION is not macOS"
                );
                min_os = Some(u32_le(file, at + 12));
            }
            0x19 => {
                for s in 0..u32_le(file, at + 64) {
                    let section = at + 72 + s * 80;
                    if (
                        name(&file[section..section + 16]),
                        name(&file[section + 16..section + 32]),
                    ) == (".dep-v0", "__DATA")
                    {
                        let (size, offset) =
                            (u64_le(file, section + 40), u32_le(file, section + 48));
                        tree = Some(super::elf::audit_tree(&file[offset..offset + size], what));
                    }
                }
            }
            _ => {}
        }
        at += size;
    }
    assert!(entry, "{what}: no LC_MAIN entry point");
    let min_os = min_os.unwrap_or_else(|| panic!("{what}: no LC_BUILD_VERSION"));
    assert!(
        min_os <= 0x000B_0000,
        "{what}: needs macOS {:#x} (> 11.0)",
        min_os
    );
    for library in &libraries {
        assert!(
            SYSTEM_LIBRARIES.contains(&library.as_str()),
            "{what} loads {library}, which a Mac does not have"
        );
    }
    assert!(
        libraries.contains(&SYSTEM_LIBRARIES[0].to_owned()),
        "{what}: no libSystem"
    );
    match signature {
        Some(dataoff) => check_signature(file, dataoff, what),
        None => assert_eq!(
            arch, "amd64",
            "{what} is not signed: Apple silicon will not run it"
        ),
    }
    tree.unwrap_or_else(|| panic!("{what} has no __DATA,.dep-v0: not built with cargo auditable"))
}
