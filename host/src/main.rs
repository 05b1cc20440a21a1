fn main() -> std::process::ExitCode {
    host::cli::main()
}
