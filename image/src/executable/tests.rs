//! [`inspect`] and [`check`] on the smallest headers of each format, built here byte by byte,
//! and on truncated and foreign files. The real programs `make image` builds are checked in
//! `tests/e2e/images/`.

use super::*;

/// A 64-bit little-endian ELF header for `machine`, with one program header of type `ptype`
/// (none when `ptype` is `None`).
pub(crate) fn elf(machine: u16, ptype: Option<u32>) -> Vec<u8> {
    let mut file = vec![0u8; 64 + 56];
    file[..4].copy_from_slice(b"\x7fELF");
    file[4] = 2;
    file[5] = 1;
    file[0x10..0x12].copy_from_slice(&3u16.to_le_bytes());
    file[0x12..0x14].copy_from_slice(&machine.to_le_bytes());
    file[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    file[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    if let Some(ptype) = ptype {
        file[0x38..0x3A].copy_from_slice(&1u16.to_le_bytes());
        file[64..68].copy_from_slice(&ptype.to_le_bytes());
    }
    file
}

/// A static x86-64 ELF program's header: what the image tests give the image writer.
pub(crate) fn static_amd64() -> Vec<u8> {
    elf(EM_X86_64, Some(1))
}

/// A static AArch64 ELF program's header.
pub(crate) fn static_arm64() -> Vec<u8> {
    elf(EM_AARCH64, Some(1))
}

/// A stand-in program's header for any plugin platform.
pub(crate) fn program_for(platform: Platform) -> Vec<u8> {
    match (platform.os, platform.architecture) {
        ("linux", "amd64") => static_amd64(),
        ("linux", _) => static_arm64(),
        ("darwin", "amd64") => mach_o(CPU_TYPE_X86_64, MH_EXECUTE),
        ("darwin", _) => mach_o(CPU_TYPE_ARM64, MH_EXECUTE),
        _ => pe(
            IMAGE_FILE_MACHINE_AMD64,
            IMAGE_FILE_EXECUTABLE_IMAGE,
            PE32_PLUS,
        ),
    }
}

pub(crate) fn mach_o(cputype: u32, filetype: u32) -> Vec<u8> {
    let mut file = vec![0u8; 32];
    file[..4].copy_from_slice(&[0xCF, 0xFA, 0xED, 0xFE]);
    file[4..8].copy_from_slice(&cputype.to_le_bytes());
    file[12..16].copy_from_slice(&filetype.to_le_bytes());
    file
}

pub(crate) fn pe(machine: u16, characteristics: u16, magic: u16) -> Vec<u8> {
    let mut file = vec![0u8; 0x80 + 26];
    file[..2].copy_from_slice(b"MZ");
    file[0x3C..0x40].copy_from_slice(&0x80u32.to_le_bytes());
    file[0x80..0x84].copy_from_slice(b"PE\0\0");
    file[0x84..0x86].copy_from_slice(&machine.to_le_bytes());
    file[0x96..0x98].copy_from_slice(&characteristics.to_le_bytes());
    file[0x98..0x9A].copy_from_slice(&magic.to_le_bytes());
    file
}

#[test]
fn each_format_names_its_platform() {
    let cases = [
        (static_amd64(), Platform::LINUX_AMD64),
        (static_arm64(), Platform::LINUX_ARM64),
        (mach_o(CPU_TYPE_X86_64, MH_EXECUTE), Platform::DARWIN_AMD64),
        (mach_o(CPU_TYPE_ARM64, MH_EXECUTE), Platform::DARWIN_ARM64),
        (
            pe(
                IMAGE_FILE_MACHINE_AMD64,
                IMAGE_FILE_EXECUTABLE_IMAGE,
                PE32_PLUS,
            ),
            Platform::WINDOWS_AMD64,
        ),
    ];
    for (file, platform) in cases {
        assert_eq!(
            inspect(&file),
            Ok(Executable {
                platform,
                dynamic: false
            })
        );
        assert_eq!(check(&file, platform), Ok(()));
    }
}

#[test]
fn a_program_for_another_platform_is_refused_by_name() {
    let err = check(&static_arm64(), Platform::LINUX_AMD64).unwrap_err();
    assert_eq!(err, "a program for linux/arm64, not linux/amd64");
    let err = check(&mach_o(CPU_TYPE_ARM64, MH_EXECUTE), Platform::LINUX_ARM64).unwrap_err();
    assert_eq!(err, "a program for darwin/arm64, not linux/arm64");
}

#[test]
fn a_dynamically_linked_elf_program_is_refused() {
    let file = elf(EM_X86_64, Some(PT_INTERP));
    assert!(inspect(&file).unwrap().dynamic);
    let err = check(&file, Platform::LINUX_AMD64).unwrap_err();
    assert!(err.contains("dynamically linked linux/amd64"), "{err}");
    assert!(err.contains("musl"), "{err}");
}

#[test]
fn libraries_and_foreign_cpus_are_refused() {
    let dll = pe(
        IMAGE_FILE_MACHINE_AMD64,
        IMAGE_FILE_EXECUTABLE_IMAGE | IMAGE_FILE_DLL,
        PE32_PLUS,
    );
    assert!(
        inspect(&dll)
            .unwrap_err()
            .contains("not an executable image")
    );
    let pe32 = pe(IMAGE_FILE_MACHINE_AMD64, IMAGE_FILE_EXECUTABLE_IMAGE, 0x10B);
    assert!(inspect(&pe32).unwrap_err().contains("not PE32+"));
    let dylib = mach_o(CPU_TYPE_ARM64, 6);
    assert!(inspect(&dylib).unwrap_err().contains("not an executable"));
    let riscv = elf(0xF3, None);
    assert!(inspect(&riscv).unwrap_err().contains("e_machine 0xf3"));
    let fat = [0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 2];
    assert!(inspect(&fat).unwrap_err().contains("universal"));
}

#[test]
fn truncated_and_foreign_files_are_errors_not_panics() {
    assert!(inspect(b"").is_err());
    assert!(inspect(b"#!/bin/sh\n").unwrap_err().contains("not an ELF"));
    let whole = static_amd64();
    for len in 0..whole.len() {
        assert!(inspect(&whole[..len]).is_err(), "{len} bytes");
    }
    // A program header table pointing far past the end of the file.
    let mut far = static_amd64();
    far[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(inspect(&far).is_err());
    // An MZ stub whose PE offset points past the end.
    let mut stub = pe(
        IMAGE_FILE_MACHINE_AMD64,
        IMAGE_FILE_EXECUTABLE_IMAGE,
        PE32_PLUS,
    );
    stub[0x3C..0x40].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(inspect(&stub).is_err());
}

/// A static ELF program for `machine` (no program headers) with one section `name` holding
/// `data`, after a `.shstrtab`: what `cargo auditable` leaves in a program, in miniature.
pub(crate) fn elf_with_section(machine: u16, name: &str, data: &[u8]) -> Vec<u8> {
    let mut file = elf(machine, None);
    let names = format!("\0.shstrtab\0{name}\0");
    let names_at = file.len();
    file.extend(names.as_bytes());
    let data_at = file.len();
    file.extend(data);
    while !file.len().is_multiple_of(8) {
        file.push(0);
    }
    let shoff = file.len();
    let section = |name: u32, kind: u32, offset: usize, size: usize| {
        let mut header = Vec::with_capacity(64);
        header.extend(name.to_le_bytes());
        header.extend(kind.to_le_bytes());
        header.extend(0u64.to_le_bytes());
        header.extend(0u64.to_le_bytes());
        header.extend((offset as u64).to_le_bytes());
        header.extend((size as u64).to_le_bytes());
        header.extend([0u8; 24]);
        header
    };
    file.extend(section(0, 0, 0, 0));
    file.extend(section(1, 3, names_at, names.len()));
    file.extend(section(11, 1, data_at, data.len()));
    file[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
    file[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
    file[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
    file[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
    file
}

#[test]
fn a_program_with_sections_is_still_read_by_its_header() {
    let file = elf_with_section(EM_AARCH64, ".dep-v0", b"data");
    assert_eq!(check(&file, Platform::LINUX_ARM64), Ok(()));
}
