//! Parser tests: the project's own Containerfile, the line syntax, and every rejection.

use super::*;

const PROJECT: &str = include_str!("../../../deploy/image/Containerfile");

fn parse_err(text: &str) -> (usize, String) {
    match parse(text).unwrap_err() {
        ImageError::Parse { line, problem } => (line, problem),
        other => panic!("expected a parse error, got {other:?}"),
    }
}

/// `text` is refused with a problem that mentions `want`.
fn refused(text: &str, want: &str) {
    let (line, problem) = parse_err(text);
    assert!(problem.contains(want), "{text:?}, line {line}: {problem}");
}

#[test]
fn reads_the_project_containerfile_as_one_stage_per_binary() {
    let file = parse(PROJECT).unwrap();
    assert_eq!(
        file.global_args,
        [ArgDecl {
            name: "BINARY".into(),
            default: Some("resize-guard-webhook".into())
        }]
    );
    let names: Vec<_> = file.stages.iter().map(|s| s.name.as_deref()).collect();
    assert_eq!(
        names,
        [
            Some("base"),
            Some("resize-guard-webhook"),
            Some("resize-guard-controller"),
            None
        ]
    );
    assert_eq!(file.stages[3].base, "${BINARY}");
    assert!(file.stages[3].instructions.is_empty());
}

#[test]
fn joins_continued_lines_and_drops_comments_inside_them() {
    let file = parse(
        "# syntax=docker/dockerfile:1\nFROM scratch\n\nLABEL a=1 \\\n# note\n  b=\"two words\"\nUSER 1:2\n",
    )
    .unwrap();
    let stage = &file.stages[0];
    assert_eq!(stage.line, 2);
    assert_eq!(
        stage.instructions,
        [
            Instruction {
                line: 4,
                step: Step::Label(vec![
                    ("a".into(), "1".into()),
                    ("b".into(), "\"two words\"".into())
                ])
            },
            Instruction {
                line: 7,
                step: Step::User("1:2".into())
            },
        ]
    );
}

#[test]
fn reads_entrypoint_in_exec_form_literally() {
    let file = parse("FROM scratch\nentrypoint [\"/bin/x\", \"--flag\"]").unwrap();
    assert_eq!(
        file.stages[0].instructions[0].step,
        Step::Entrypoint(vec!["/bin/x".into(), "--flag".into()])
    );
}

#[test]
fn rejects_run_naming_the_line_and_the_supported_subset() {
    let (line, problem) = parse_err("FROM scratch\nCOPY a /a\nRUN echo hi\n");
    assert_eq!(line, 3);
    assert!(problem.starts_with("RUN is not supported"), "{problem}");
    assert!(problem.contains("FROM scratch, ARG, COPY, USER, ENTRYPOINT and LABEL"));
}

#[test]
fn rejects_every_instruction_outside_the_subset() {
    for instruction in [
        "ENV A=1",
        "CMD [\"x\"]",
        "WORKDIR /x",
        "ADD a /a",
        "EXPOSE 80",
    ] {
        let (line, _) = parse_err(&format!("FROM scratch\n{instruction}"));
        assert_eq!(line, 2, "{instruction}");
    }
}

#[test]
fn rejects_shell_form_and_variables_in_entrypoint() {
    refused("FROM scratch\nENTRYPOINT /bin/x --flag", "exec form");
    refused(
        "FROM scratch\nENTRYPOINT [\"/usr/local/bin/${BINARY}\"]",
        "do not expand",
    );
}

#[test]
fn rejects_flags_and_multi_source_copies() {
    refused("FROM scratch\nCOPY --chown=1:1 a /a", "--chown");
    refused("FROM --platform=linux/arm64 scratch", "--platform");
    refused("FROM scratch\nCOPY a b /dir/", "exactly one source");
}

#[test]
fn rejects_malformed_lines() {
    assert_eq!(parse_err("USER 1\nFROM scratch").0, 1);
    refused("FROM scratch\nLABEL key value", "key=value");
    refused("FROM scratch\nLABEL a=\"open", "unterminated");
    refused("FROM scratch\nUSER 1 \\", "continued line");
    refused("# escape=`\nFROM scratch", "escape");
    refused("ARG A\n", "no FROM");
}
