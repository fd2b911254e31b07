//! What the image and plugin tests ask of a shipped Linux binary, read from its ELF headers here
//! (not with any code under test): the CPU it is for (`e_machine`: 0x3E x86-64, 0xB7 AArch64),
//! static (no `PT_INTERP` program header, so it runs on scratch), stripped (no `SHT_SYMTAB`
//! section), and the dependency tree `cargo auditable` embedded (the `.dep-v0` section, zlib
//! JSON); and running it: `--version` natively on amd64, on arm64 under qemu's `qemu-aarch64`
//! (Debian's static build, fetched rootless by `third_party/qemu/build.sh`; a missing one fails,
//! never skips).
#![allow(dead_code)]

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The named section's bytes, from the section header table and `.shstrtab`.
pub fn section<'a>(elf: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let (shoff, shentsize, shnum) = (u64_at(elf, 0x28), u16_at(elf, 0x3A), u16_at(elf, 0x3C));
    let header = |i: usize| shoff + i * shentsize;
    let strtab = header(u16_at(elf, 0x3E));
    let names = u64_at(elf, strtab + 0x18);
    (0..shnum).find_map(|i| {
        let at = header(i);
        let start = names + u32_at(elf, at) as usize;
        let end = start + elf[start..].iter().position(|&b| b == 0)?;
        (&elf[start..end] == name.as_bytes()).then(|| {
            let (offset, size) = (u64_at(elf, at + 0x18), u64_at(elf, at + 0x20));
            &elf[offset..offset + size]
        })
    })
}

/// The dependency tree `cargo auditable` embedded in a program: zlib-compressed JSON.
pub fn audit_tree(compressed: &[u8], what: &str) -> serde_json::Value {
    let mut json = Vec::new();
    flate2::read::ZlibDecoder::new(compressed)
        .read_to_end(&mut json)
        .unwrap_or_else(|e| panic!("{what}: .dep-v0 is not zlib: {e}"));
    serde_json::from_slice(&json).unwrap_or_else(|e| panic!("{what}: .dep-v0 is not JSON: {e}"))
}

/// The `.dep-v0` tree of an ELF program; fails if it has none.
pub fn elf_audit_tree(elf: &[u8], what: &str) -> serde_json::Value {
    let compressed = section(elf, ".dep-v0").unwrap_or_else(|| {
        panic!("{what} has no .dep-v0 section: it was not built with cargo auditable")
    });
    audit_tree(compressed, what)
}

/// The directory of `qemu-aarch64`, fetched (or reused) by the project's script once per run.
fn qemu_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(fetch_qemu).clone()
}

fn fetch_qemu() -> PathBuf {
    let script = super::repo_root().join("third_party/qemu/build.sh");
    let out = Command::new(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{} failed (it fetches Debian's qemu-user-static without root): {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
}

/// `program --version`'s stdout, run natively (amd64) or under `qemu-aarch64` (arm64).
pub fn run_version(program: &Path, arch: &str) -> String {
    run(program, arch, &["--version"])
}

/// `program ARGS…`'s stdout, run natively (amd64) or under `qemu-aarch64` (arm64), which must
/// succeed; retries while another test thread's fork still holds the freshly written file open
/// (ETXTBSY).
pub fn run(program: &Path, arch: &str, args: &[&str]) -> String {
    let mut command = match arch {
        "amd64" => Command::new(program),
        "arm64" => {
            let mut qemu = Command::new(qemu_dir().join("qemu-aarch64"));
            qemu.arg(program);
            qemu
        }
        other => panic!("cannot run a {other} binary here"),
    };
    command.args(args);
    for _ in 0..50 {
        match command.output() {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{} {args:?} ({arch}): {out:?}",
                    program.display()
                );
                return String::from_utf8(out.stdout).unwrap();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("running {}: {e}", program.display()),
        }
    }
    panic!("{} stayed busy", program.display());
}
