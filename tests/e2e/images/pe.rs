//! What the plugin tests ask of a Windows program, read from its PE headers here (not with any
//! code under test): a PE32+ console executable for x86-64 whose imports are all Windows' own
//! DLLs (none of MinGW's `lib*.dll` runtime, which a user's machine does not have), carrying
//! `cargo auditable`'s dependency tree (section `.dep-v0`).

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// Asserts `file` is a Windows x86-64 console program importing only system DLLs; returns the
/// DLLs it imports (lower case) and its embedded dependency tree.
pub fn check(file: &[u8], what: &str) -> (Vec<String>, serde_json::Value) {
    assert_eq!(&file[..2], b"MZ", "{what}: no MZ header");
    let pe = u32_at(file, 0x3C);
    assert_eq!(&file[pe..pe + 4], b"PE\0\0", "{what}: no PE header");
    let coff = pe + 4;
    assert_eq!(u16_at(file, coff), 0x8664, "{what}: not for x86-64");
    let characteristics = u16_at(file, coff + 18);
    assert!(
        characteristics & 0x2 != 0 && characteristics & 0x2000 == 0,
        "{what}: not an .exe"
    );
    let optional = coff + 20;
    assert_eq!(u16_at(file, optional), 0x20B, "{what}: not PE32+");
    assert_eq!(
        u16_at(file, optional + 68),
        3,
        "{what}: not a console program"
    );
    let sections: Vec<(String, usize, usize, usize)> = (0..u16_at(file, coff + 2))
        .map(|i| {
            let at = optional + u16_at(file, coff + 16) + i * 40;
            let name = String::from_utf8_lossy(&file[at..at + 8])
                .trim_end_matches('\0')
                .to_owned();
            // name, virtual address, virtual size, file offset
            (
                name,
                u32_at(file, at + 12),
                u32_at(file, at + 8),
                u32_at(file, at + 20),
            )
        })
        .collect();
    let offset = |rva: usize| {
        sections
            .iter()
            .find(|(_, va, size, _)| (*va..va + size).contains(&rva))
            .map(|(_, va, _, raw)| raw + rva - va)
            .unwrap_or_else(|| panic!("{what}: RVA {rva:#x} is in no section"))
    };
    let imports = offset(u32_at(file, optional + 112 + 8));
    let mut dlls = Vec::new();
    for i in 0.. {
        let descriptor = imports + i * 20;
        let name_rva = u32_at(file, descriptor + 12);
        if name_rva == 0 {
            break;
        }
        let name = &file[offset(name_rva)..];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap()];
        dlls.push(String::from_utf8_lossy(name).to_ascii_lowercase());
    }
    assert!(
        dlls.iter().any(|d| d == "kernel32.dll"),
        "{what}: imports {dlls:?}"
    );
    for dll in &dlls {
        assert!(
            dll.ends_with(".dll") && !dll.starts_with("lib"),
            "{what} imports {dll}: not a Windows DLL (a MinGW runtime?); all: {dlls:?}"
        );
    }
    let (_, _, size, raw) = sections
        .iter()
        .find(|(name, ..)| name == ".dep-v0")
        .unwrap_or_else(|| panic!("{what} has no .dep-v0 section: not built with cargo auditable"));
    let tree = super::elf::audit_tree(&file[*raw..raw + size], what);
    (dlls, tree)
}
