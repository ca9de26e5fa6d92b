package judge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Service serves the Host gRPC service to the run's task plugins on a Unix socket in a
// directory only the host's user can enter (mode 0700, under TMPDIR: the run's private
// temporary directory), with a random token per run. The judge may be set after the service
// starts (plugins are configured before the models load); calls before that are Unavailable.
type Service struct {
	dir   string
	sock  string
	token string
	srv   *grpc.Server
	judge atomic.Pointer[judgeBox]
}

type judgeBox struct{ j task.Judger }

// Start listens and serves in the background.
func Start() (*Service, error) {
	dir, err := os.MkdirTemp("", "rlhost-host-")
	if err != nil {
		return nil, fmt.Errorf("judge: host service: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("judge: host service token: %w", err)
	}
	s := &Service{dir: dir, sock: filepath.Join(dir, "host.sock"), token: hex.EncodeToString(b[:])}
	ln, err := net.Listen("unix", s.sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("judge: host service: %w", err)
	}
	s.srv = grpc.NewServer()
	task.RegisterHost(s.srv, judgerFunc(s.call), s.token)
	go s.srv.Serve(ln)
	return s, nil
}

// SetJudge sets the judge calls go to.
func (s *Service) SetJudge(j task.Judger) { s.judge.Store(&judgeBox{j}) }

// HostService describes the service for ConfigureRequest.host_service.
func (s *Service) HostService() *task.HostService {
	return &task.HostService{Address: "unix://" + s.sock, Token: s.token, Features: []string{task.HostFeatureJudge}}
}

// Close stops the server and removes its directory.
func (s *Service) Close() {
	s.srv.Stop()
	os.RemoveAll(s.dir)
}

func (s *Service) call(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error) {
	b := s.judge.Load()
	if b == nil {
		return task.JudgeResult{}, status.Error(codes.Unavailable, "Judge: the judge model is still loading")
	}
	return b.j.Judge(ctx, req)
}

type judgerFunc func(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error)

func (f judgerFunc) Judge(ctx context.Context, req task.JudgeRequest) (task.JudgeResult, error) {
	return f(ctx, req)
}
