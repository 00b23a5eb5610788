// No console window on Windows release builds; on Linux this is a plain binary.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    pagar_lib::run();
}
