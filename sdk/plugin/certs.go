package plugin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// HostCerts is the host's one-time mutual-TLS identity for one plugin launch: a self-signed CA
// and a client certificate it signed, both ECDSA P-256 with SHA-256 signatures, which every
// mainstream TLS stack accepts (Go, OpenSSL, BoringSSL in gRPC's C core, Python, Ruby and Java
// with netty-tcnative, rustls in tonic). go-plugin's own AutoMTLS certificate has a P-521 key,
// which BoringSSL and rustls refuse from a client; see docs/protocol.md.
//
// The plugin receives CAPEM in PLUGIN_CLIENT_CERT and requires that the client's chain ends in
// it. The client certificate is a leaf (not a CA), because rustls refuses a CA certificate as
// an end entity.
type HostCerts struct {
	CAPEM  []byte          // PEM of the CA certificate: the value of PLUGIN_CLIENT_CERT
	Client tls.Certificate // the client leaf and the CA, with the leaf's private key
}

// NewHostCerts makes a fresh HostCerts. The keys live only in this process's memory.
func NewHostCerts() (*HostCerts, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("plugin: mTLS CA key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("plugin: mTLS client key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "rlhost host CA", Organization: []string{"rlhost"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("plugin: mTLS CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("plugin: mTLS CA certificate: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"rlhost"}},
		DNSNames:              []string{"localhost"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("plugin: mTLS client certificate: %w", err)
	}
	return &HostCerts{
		CAPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Client: tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey},
	}, nil
}

// TLSConfig is the client configuration the host dials a plugin with. go-plugin fills RootCAs
// with the certificate the plugin returns in its handshake line; the plugin is verified as
// "localhost" against it.
func (h *HostCerts) TLSConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{h.Client},
		MinVersion:   tls.VersionTLS12,
		ServerName:   "localhost",
	}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}
