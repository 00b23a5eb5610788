//! `nfce-sample DIR`: writes into DIR the sandbox sale's note issued normally and in
//! contingência, signed as they would be sent, their DANFEs (HTML), an inutilização of numbers 3
//! to 5, and the certificate that signed them — for
//! checking with tools Pagar did not write (`xmllint --schema`, `xmlsec1 --verify`).

use nfce::{danfe, exemplo, Certificado, Emissao};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("uso: nfce-sample DIR");
        return ExitCode::from(2);
    };
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfce-sample: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let emitente = exemplo::emitente();
    let cert = Certificado::sandbox(&emitente.cnpj, &emitente.razao_social)?;
    let (nota_normal, nota_contingencia) = (
        exemplo::nota(1, Emissao::Normal, false),
        exemplo::contingencia(2),
    );
    let normal = nota_normal.assinar(&cert)?;
    let contingencia = nota_contingencia.assinar(&cert)?;
    std::fs::write(dir.join("certificado.pem"), cert.certificate_pem()?)?;
    for (name, nota, assinada) in [
        ("normal", &nota_normal, &normal),
        ("contingencia", &nota_contingencia, &contingencia),
    ] {
        let file = dir.join(format!("nfce-{name}.xml"));
        std::fs::write(&file, &assinada.xml)?;
        // Not authorized by any SEFAZ: the DANFE shows no protocol.
        let page = danfe::html(nota, assinada, None)?;
        std::fs::write(dir.join(format!("danfe-{name}.html")), page)?;
        println!(
            "{}: chave {}, QR Code {}",
            file.display(),
            assinada.chave,
            assinada.qrcode
        );
    }
    let inut = dir.join("inutilizacao.xml");
    std::fs::write(&inut, exemplo::inutilizacao(3, 5).assinar(&cert)?)?;
    println!("{}: série 1, números 3 a 5", inut.display());
    Ok(())
}
