//! What a program file is, read from its header alone: the format (ELF on Linux, Mach-O on
//! macOS, PE on Windows), the CPU it is for, and for ELF whether it needs a dynamic loader. The
//! image and plugin writers refuse a program that is not for the platform it is packed as, or
//! an ELF program with a `PT_INTERP` (a dynamic loader is not on a `FROM scratch` image), so a
//! cross build gone wrong stops the build instead of shipping a program that cannot start.
//!
//! Every read is bounds-checked: a truncated or foreign file is an error, never a panic.

use crate::oci::Platform;

/// ELF `e_machine` of x86-64.
const EM_X86_64: u16 = 0x3E;
/// ELF `e_machine` of AArch64.
const EM_AARCH64: u16 = 0xB7;
/// ELF program header type of the dynamic loader's path.
const PT_INTERP: u32 = 3;
/// Mach-O `cputype` of x86-64 (`CPU_TYPE_X86 | CPU_ARCH_ABI64`).
const CPU_TYPE_X86_64: u32 = 0x0100_0007;
/// Mach-O `cputype` of arm64 (`CPU_TYPE_ARM | CPU_ARCH_ABI64`).
const CPU_TYPE_ARM64: u32 = 0x0100_000C;
/// Mach-O `filetype` of an executable.
const MH_EXECUTE: u32 = 2;
/// PE `Machine` of x86-64.
const IMAGE_FILE_MACHINE_AMD64: u16 = 0x8664;
/// PE `Machine` of arm64.
const IMAGE_FILE_MACHINE_ARM64: u16 = 0xAA64;
/// PE optional header magic of a 64-bit image (PE32+).
const PE32_PLUS: u16 = 0x20B;
/// PE `Characteristics`: an executable image, and a DLL.
const IMAGE_FILE_EXECUTABLE_IMAGE: u16 = 0x0002;
const IMAGE_FILE_DLL: u16 = 0x2000;

/// What a program's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executable {
    /// The operating system and CPU, in the image-spec's (and krew's) names.
    pub platform: Platform,
    /// ELF only: it names a dynamic loader (`PT_INTERP`); always false for Mach-O and PE.
    pub dynamic: bool,
}

fn bytes<const N: usize>(file: &[u8], at: usize) -> Result<[u8; N], String> {
    file.get(at..at.saturating_add(N))
        .and_then(|b| <[u8; N]>::try_from(b).ok())
        .ok_or_else(|| {
            format!(
                "truncated: {} bytes, the header needs {}",
                file.len(),
                at + N
            )
        })
}

fn u16_le(file: &[u8], at: usize) -> Result<u16, String> {
    bytes(file, at).map(u16::from_le_bytes)
}

fn u32_le(file: &[u8], at: usize) -> Result<u32, String> {
    bytes(file, at).map(u32::from_le_bytes)
}

fn u64_le(file: &[u8], at: usize) -> Result<usize, String> {
    let value = bytes(file, at).map(u64::from_le_bytes)?;
    usize::try_from(value).map_err(|_| format!("offset {value} does not fit in memory"))
}

/// Reads the header of `file` (a whole program's bytes).
pub fn inspect(file: &[u8]) -> Result<Executable, String> {
    match file.get(..4) {
        Some(b"\x7fELF") => elf(file),
        Some([0xCF, 0xFA, 0xED, 0xFE]) => mach_o(file),
        Some([b'M', b'Z', ..]) => pe(file),
        Some([0xCA, 0xFE, 0xBA, 0xBE]) => {
            Err("a universal (fat) Mach-O: one program per platform is expected".into())
        }
        _ => Err("not an ELF, 64-bit Mach-O or PE program".into()),
    }
}

/// The architecture a header's CPU field names: `found` against the format's codes for x86-64
/// and arm64; `field` names the field in the error.
fn cpu<T>(found: T, [amd64, arm64]: [T; 2], field: &str) -> Result<&'static str, String>
where
    T: PartialEq + std::fmt::LowerHex,
{
    if found == amd64 {
        Ok("amd64")
    } else if found == arm64 {
        Ok("arm64")
    } else {
        Err(format!("{field} {found:#x}, neither x86-64 nor arm64"))
    }
}

fn elf(file: &[u8]) -> Result<Executable, String> {
    let [class, data] = bytes(file, 4)?;
    if (class, data) != (2, 1) {
        return Err("ELF but not 64-bit little-endian".into());
    }
    let machines = [EM_X86_64, EM_AARCH64];
    let architecture = cpu(u16_le(file, 0x12)?, machines, "ELF for e_machine")?;
    let (phoff, phentsize, phnum) = (
        u64_le(file, 0x20)?,
        usize::from(u16_le(file, 0x36)?),
        usize::from(u16_le(file, 0x38)?),
    );
    let mut dynamic = false;
    for i in 0..phnum {
        let at = i
            .checked_mul(phentsize)
            .and_then(|o| o.checked_add(phoff))
            .ok_or("ELF program header table out of range")?;
        if phentsize < 4 || file.len() < at.saturating_add(phentsize) {
            return Err(format!(
                "ELF program header {i} is past the end of the file"
            ));
        }
        dynamic |= u32_le(file, at)? == PT_INTERP;
    }
    Ok(Executable {
        platform: Platform::of("linux", architecture),
        dynamic,
    })
}

fn mach_o(file: &[u8]) -> Result<Executable, String> {
    let cpu_types = [CPU_TYPE_X86_64, CPU_TYPE_ARM64];
    let architecture = cpu(u32_le(file, 4)?, cpu_types, "Mach-O for cputype")?;
    let filetype = u32_le(file, 12)?;
    if filetype != MH_EXECUTE {
        return Err(format!("Mach-O filetype {filetype}, not an executable (2)"));
    }
    Ok(Executable {
        platform: Platform::of("darwin", architecture),
        dynamic: false,
    })
}

fn pe(file: &[u8]) -> Result<Executable, String> {
    let at = usize::try_from(u32_le(file, 0x3C)?).map_err(|_| "PE header offset out of range")?;
    if bytes::<4>(file, at)? != *b"PE\0\0" {
        return Err("an MZ file without a PE header".into());
    }
    let machines = [IMAGE_FILE_MACHINE_AMD64, IMAGE_FILE_MACHINE_ARM64];
    let architecture = cpu(u16_le(file, at + 4)?, machines, "PE for Machine")?;
    let characteristics = u16_le(file, at + 22)?;
    if characteristics & IMAGE_FILE_EXECUTABLE_IMAGE == 0 || characteristics & IMAGE_FILE_DLL != 0 {
        return Err(format!(
            "PE Characteristics {characteristics:#x}: not an executable image"
        ));
    }
    let magic = u16_le(file, at + 24)?;
    if magic != PE32_PLUS {
        return Err(format!(
            "PE optional header magic {magic:#x}, not PE32+ (0x20b)"
        ));
    }
    Ok(Executable {
        platform: Platform::of("windows", architecture),
        dynamic: false,
    })
}

/// Checks that `file` is a program for `platform` that runs without a dynamic loader (what a
/// `FROM scratch` image and a plugin archive need); the error says what it is instead.
pub fn check(file: &[u8], platform: Platform) -> Result<(), String> {
    let found = inspect(file)?;
    if found.platform != platform {
        return Err(format!("a program for {}, not {platform}", found.platform));
    }
    if found.dynamic {
        return Err(format!(
            "a dynamically linked {platform} program (it names a dynamic loader, PT_INTERP): \
             build it static (a *-linux-musl target)"
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
