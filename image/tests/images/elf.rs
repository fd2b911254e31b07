//! What the image and plugin tests ask of a shipped binary, read from its ELF headers here (not
//! with any code under test): the CPU it is for (`e_machine`: 0x3E x86-64, 0xB7 AArch64), static
//! (no `PT_INTERP` program header, so it runs on scratch), stripped (no `SHT_SYMTAB` section);
//! and running it: `--version` natively on amd64, under qemu-user's `qemu-aarch64` on arm64
//! (`make image` installs qemu-user; a missing one fails, never skips).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// The platforms `make image` builds, as an OCI index and krew name them.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

fn u16_at(elf: &[u8], at: usize) -> usize {
    u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize
}

fn u32_at(elf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(elf[at..at + 4].try_into().unwrap())
}

fn u64_at(elf: &[u8], at: usize) -> usize {
    u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize
}

/// Asserts `elf` (named `what`) is a static, stripped, 64-bit little-endian executable for
/// `arch` (`amd64` or `arm64`).
pub fn assert_static_stripped(elf: &[u8], arch: &str, what: &str) {
    assert_eq!(&elf[..4], b"\x7fELF", "{what}: not an ELF file");
    assert_eq!(elf[4], 2, "{what}: not a 64-bit ELF file");
    assert_eq!(elf[5], 1, "{what}: not little-endian");
    let machine = u16_at(elf, 0x12);
    let want = match arch {
        "amd64" => 0x3E,
        "arm64" => 0xB7,
        other => panic!("no ELF machine known for {other}"),
    };
    assert_eq!(
        machine, want,
        "{what}: e_machine {machine:#x}, expected {want:#x} for {arch}"
    );
    let (phoff, phentsize, phnum) = (u64_at(elf, 0x20), u16_at(elf, 0x36), u16_at(elf, 0x38));
    let interp = (0..phnum).any(|i| u32_at(elf, phoff + i * phentsize) == 3);
    assert!(
        !interp,
        "{what} is dynamically linked (PT_INTERP): it cannot run on scratch"
    );
    let (shoff, shentsize, shnum) = (u64_at(elf, 0x28), u16_at(elf, 0x3A), u16_at(elf, 0x3C));
    let symtab = (0..shnum).any(|i| u32_at(elf, shoff + i * shentsize + 4) == 2);
    assert!(!symtab, "{what} is not stripped (it has a .symtab)");
}

/// `program --version`'s stdout, run natively (amd64) or under `qemu-aarch64` (arm64); retries
/// while another test thread's fork still holds the freshly written file open (ETXTBSY).
pub fn run_version(program: &Path, arch: &str) -> String {
    let mut command = match arch {
        "amd64" => Command::new(program),
        "arm64" => {
            let mut qemu = Command::new("qemu-aarch64");
            qemu.arg(program);
            qemu
        }
        other => panic!("cannot run a {other} binary here"),
    };
    command.arg("--version");
    for _ in 0..50 {
        match command.output() {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{} --version ({arch}): {out:?}",
                    program.display()
                );
                return String::from_utf8(out.stdout).unwrap();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && arch == "arm64" => panic!(
                "qemu-aarch64 is not on PATH ({e}): `make image` installs qemu-user \
                 (apt-get install qemu-user) to run the arm64 binaries"
            ),
            Err(e) => panic!("running {}: {e}", program.display()),
        }
    }
    panic!("{} stayed busy", program.display());
}
