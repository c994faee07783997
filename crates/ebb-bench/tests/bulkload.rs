//! Ebb's own `bulkload` and `checkpoint` benchmarks through the binary:
//! the keys land in the database, and the checkpoint leaves nothing behind.

use std::process::{Command, Output};

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

#[test]
fn bulkload_ingests_every_key_and_checkpoint_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let o = ebb_bench(&[
        "--benchmarks=bulkload,checkpoint,readseq",
        "--num=5000",
        "--bulkload_file_keys=1200",
        "--value_size=50",
        "--progress=false",
        &format!("--db={}", db.display()),
    ]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let line = |name: &str| {
        out.lines()
            .find(|l| l.split_once(" : ").is_some_and(|(n, _)| n.trim() == name))
            .unwrap_or_else(|| panic!("no {name} line:\n{out}"))
            .to_string()
    };
    assert!(line("bulkload").contains(" 5000 operations"), "{}", line("bulkload"));
    assert!(line("checkpoint").contains(" 1 operations"), "{}", line("checkpoint"));
    // readseq reads every key the files held.
    assert!(line("readseq").contains(" 5000 operations"), "{}", line("readseq"));
    assert!(!db.with_extension("bulkload").exists() && !db.with_extension("checkpoint").exists());
    // Five files were ingested, none rewritten: the database holds five tables.
    let tables = std::fs::read_dir(&db)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "sst"))
        .count();
    assert_eq!(tables, 5);
}
