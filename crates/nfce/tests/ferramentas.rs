//! The notes Pagar signs, checked by tools Pagar did not write: the official schema of leiaute
//! 4.00 with libxml2's `xmllint`, the XML signature with `xmlsec1 --verify`, the offline QR
//! Code's signature with `openssl dgst -verify`. `make deps-nfce` installs the tools and fetches
//! the schemas (`NFCE_XSD_DIR`, by default `target/nfce-xsd`); a missing one fails, never skips.

use nfce::{exemplo, Certificado, Emissao, NotaAssinada};
use std::path::{Path, PathBuf};
use std::process::Command;

fn xsd_dir() -> PathBuf {
    std::env::var_os("NFCE_XSD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/nfce-xsd"))
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} não pôde rodar ({e}): instale com `make deps-nfce`"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

struct Checked {
    dir: tempfile::TempDir,
    cert: PathBuf,
}

impl Checked {
    fn new(cert: &Certificado) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("certificado.pem");
        std::fs::write(&path, cert.certificate_pem().unwrap()).unwrap();
        Checked { dir, cert: path }
    }

    fn write(&self, name: &str, xml: &str) -> PathBuf {
        let file = self.dir.path().join(name);
        std::fs::write(&file, xml).unwrap();
        file
    }

    fn schema(&self, file: &Path) -> (bool, String) {
        self.schema_of("nfe_v4.00.xsd", file)
    }

    fn schema_of(&self, root: &str, file: &Path) -> (bool, String) {
        let xsd = xsd_dir().join(root);
        assert!(
            xsd.exists(),
            "{} ausente: rode `make deps-nfce`",
            xsd.display()
        );
        run(Command::new("xmllint")
            .arg("--noout")
            .arg("--schema")
            .arg(xsd)
            .arg(file))
    }

    fn signature(&self, file: &Path) -> (bool, String) {
        self.signature_of("infNFe", file)
    }

    fn signature_of(&self, element: &str, file: &Path) -> (bool, String) {
        run(Command::new("xmlsec1")
            .args(["--verify", "--id-attr:Id", element, "--trusted-pem"])
            .arg(&self.cert)
            .arg(file))
    }
}

fn signed(cert: &Certificado) -> (NotaAssinada, NotaAssinada) {
    let normal = exemplo::nota(1, Emissao::Normal, false)
        .assinar(cert)
        .unwrap();
    let offline = exemplo::contingencia(2).assinar(cert).unwrap();
    (normal, offline)
}

#[test]
fn a_note_issued_normally_and_one_in_contingencia_validate_against_the_schema_and_verify() {
    // Arrange
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    let (normal, offline) = signed(&cert);
    // Act / Assert
    for (name, nota) in [("normal.xml", &normal), ("contingencia.xml", &offline)] {
        let file = check.write(name, &nota.xml);
        let (valid, why) = check.schema(&file);
        assert!(valid, "{name} fora do schema: {why}");
        let (verified, why) = check.signature(&file);
        assert!(verified, "{name}: assinatura não confere: {why}");
    }
    assert!(normal.xml.contains("<tpEmis>1</tpEmis>"));
    assert!(offline.xml.contains("<tpEmis>9</tpEmis><cDV>"));
    assert!(offline
        .xml
        .contains("<dhCont>2026-12-05T18:45:00-03:00</dhCont>"));
    assert_ne!(normal.chave, offline.chave);
}

#[test]
fn a_signed_note_changed_by_one_character_no_longer_verifies() {
    // Arrange
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    let (normal, _) = signed(&cert);
    let total = format!("<vNF>{}</vNF>", pagar_total(normal.total));
    assert!(normal.xml.contains(&total), "{total}");
    // Act: the total raised by a centavo, inside what was signed.
    let changed = normal.xml.replace(
        &total,
        &format!("<vNF>{}</vNF>", pagar_total(normal.total + 1)),
    );
    let file = check.write("alterada.xml", &changed);
    // Assert
    let (verified, why) = check.signature(&file);
    assert!(!verified, "uma nota alterada passou: {why}");
    let (valid, _) = check.schema(&file);
    assert!(
        valid,
        "the change keeps the schema: only the signature catches it"
    );
}

#[test]
fn the_offline_qr_code_carries_the_total_and_a_signature_openssl_verifies_with_the_certificate() {
    // Arrange
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    let (normal, offline) = signed(&cert);
    // Act
    let p = offline.qrcode.split_once("?p=").unwrap().1;
    let (fields, signature) = p.rsplit_once('|').unwrap();
    // Assert
    assert_eq!(
        normal.qrcode,
        format!("{}?p={}|3|2", exemplo::urls().qrcode, normal.chave)
    );
    let parts: Vec<_> = fields.split('|').collect();
    assert_eq!(
        parts,
        [
            offline.chave.as_ref(),
            "3",
            "2",
            "05",
            &pagar_total(offline.total),
            "2",
            "52998224725"
        ]
    );
    let dir = check.dir.path();
    std::fs::write(dir.join("campos.txt"), fields).unwrap();
    std::fs::write(dir.join("assinatura.bin"), decode(signature)).unwrap();
    let (_, pubkey) = run(Command::new("openssl")
        .args(["x509", "-pubkey", "-noout", "-in"])
        .arg(&check.cert));
    std::fs::write(dir.join("chave.pem"), pubkey).unwrap();
    let (verified, why) = run(Command::new("openssl")
        .args(["dgst", "-sha1", "-verify"])
        .arg(dir.join("chave.pem"))
        .arg("-signature")
        .arg(dir.join("assinatura.bin"))
        .arg(dir.join("campos.txt")));
    assert!(verified, "{why}");
    let offline_xml = check.write("contingencia.xml", &offline.xml);
    assert!(
        check.schema(&offline_xml).0,
        "the QR Code matches the schema's v3 offline pattern"
    );
}

fn pagar_total(centavos: i64) -> String {
    format!("{}.{:02}", centavos / 100, centavos % 100)
}

fn decode(b64: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

/// The DANFE rendered by Chromium (headless) as a PNG, kept in `target/screenshots`.
fn screenshot(html: &Path, png: &Path) {
    let (ok, why) = run(Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=340,1000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display())));
    assert!(ok && png.exists(), "chromium: {why}");
}

#[test]
fn the_danfe_drawn_by_a_browser_has_a_qr_code_zbarimg_reads_as_the_notes_own() {
    // Arrange
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let notas = [
        ("normal", exemplo::nota(1, Emissao::Normal, false)),
        ("contingencia", exemplo::contingencia(2)),
    ];
    for (name, nota) in notas {
        let assinada = nota.assinar(&cert).unwrap();
        let page = nfce::danfe::html(&nota, &assinada, None).unwrap();
        let html = check.write(&format!("danfe-{name}.html"), &page);
        let png = shots.join(format!("nfce-danfe-{name}.png"));
        // Act
        screenshot(&html, &png);
        let (read, texts) = run(Command::new("zbarimg")
            .args(["--raw", "-q", "-Sdisable", "-Sqrcode.enable"])
            .arg(&png));
        // Assert
        assert!(
            read,
            "zbarimg found no QR Code in {}: {texts}",
            png.display()
        );
        assert_eq!(texts.lines().next(), Some(assinada.qrcode.as_str()));
        assert!(assinada.qrcode.starts_with(&format!(
            "{}?p={}|3|2",
            exemplo::urls().qrcode,
            assinada.chave
        )));
        let contingencia = page.contains("EMITIDA EM CONTINGÊNCIA");
        assert_eq!(contingencia, name == "contingencia", "{name}");
        assert!(page.contains(&exemplo::urls().chave));
    }
}

#[test]
fn an_inutilizacao_validates_against_its_schema_and_verifies() {
    // Arrange
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    // Act
    let inut = exemplo::inutilizacao(3, 5).assinar(&cert).unwrap();
    let file = check.write("inutilizacao.xml", &inut);
    // Assert
    let (valid, why) = check.schema_of("inutNFe_v4.00.xsd", &file);
    assert!(valid, "fora do schema: {why}");
    let (verified, why) = check.signature_of("infInut", &file);
    assert!(verified, "{why}");
    assert!(
        inut.contains("<infInut Id=\"ID35261122233300018165001000000003000000005\">"),
        "{inut}"
    );
    let mut short = exemplo::inutilizacao(3, 5);
    short.justificativa = "sem motivo".into();
    assert!(short.assinar(&cert).is_err());
    assert!(exemplo::inutilizacao(5, 3).assinar(&cert).is_err());
}

#[test]
fn a_consulta_of_a_cancelled_note_with_its_event_validates_against_the_schema() {
    // Arrange: note 1 authorized, then cancelled (110111), as the simulator answers a consulta.
    let cert = exemplo::certificado().unwrap();
    let check = Checked::new(&cert);
    let nota = exemplo::nota(1, Emissao::Normal, false);
    let chave = nota.chave().unwrap();
    let evento = nfce::evento::Evento {
        tipo: nfce::evento::TipoEvento::Cancelamento,
        chave: chave.clone(),
        cnpj: exemplo::emitente().cnpj,
        ambiente: nfce::Ambiente::Homologacao,
        protocolo: "135260000000001".into(),
        justificativa: "Venda devolvida pelo cliente".into(),
        quando: "2026-12-06T10:00:00-03:00".into(),
        aplicativo: "Pagar testes".into(),
    }
    .assinar(&cert)
    .unwrap();
    let protocolo = nfce::soap::Protocolo {
        chave: chave.as_ref().to_string(),
        c_stat: 100,
        x_motivo: "Autorizado o uso da NF-e".into(),
        n_prot: Some("135260000000001".into()),
        dh_recbto: "2026-12-06T09:50:00-03:00".into(),
        dig_val: Some("AAAAAAAAAAAAAAAAAAAAAAAAAAA=".into()),
    };
    let resposta = nfce::soap::Resposta {
        tp_amb: 2,
        c_uf: 35,
        ver_aplic: "PAGAR_SEFAZ_SIM_1.0".into(),
        dh_recbto: "2026-12-06T10:05:00-03:00".into(),
        c_stat: 101,
        x_motivo: "Cancelamento de NF-e homologado".into(),
        protocolo: Some(protocolo),
    };
    let registrado = nfce::soap::EventoRegistrado {
        evento,
        tp_evento: "110111".into(),
        n_seq: 1,
        n_prot: "135260000000002".into(),
        dh_reg: "2026-12-06T10:00:01-03:00".into(),
    };
    // Act
    let envelope = nfce::soap::resposta_consulta(&resposta, chave.as_ref(), &[registrado]);
    let doc = roxmltree::Document::parse(&envelope).unwrap();
    let body = doc
        .descendants()
        .find(|n| n.tag_name().name() == "retConsSitNFe")
        .unwrap();
    let file = check.write("ret-consulta.xml", &envelope[body.range()]);
    // Assert
    let (valid, why) = check.schema_of("retConsSitNFe_v4.00.xsd", &file);
    assert!(valid, "{why}");
    let (verified, why) = check.signature_of("infEvento", &file);
    assert!(verified, "the event inside, as it was signed: {why}");
}
