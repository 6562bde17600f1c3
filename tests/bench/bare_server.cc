// orderhold-bare-server: the floor of tests/bench/run.sh's cpu phase. A gRPC callback server of
// the same gRPC build and proto as orderhold-server, with nothing of OrderHold in it: PlaceHold
// answers a hold echoing the request's ids (created = true) at once, on the thread gRPC called
// it on; every other rpc is UNIMPLEMENTED. No health, reflection, metrics, interceptors or
// limits: what a call costs in gRPC alone, so the bench can show how much of
// `orderhold-server --store=noop`'s cost per call is ours. Not a test and not for production.
//
//   orderhold-bare-server --grpc_address=127.0.0.1:50051
//
// Runs until SIGTERM/SIGINT.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "grpcpp/grpcpp.h"
#include "orderhold/v1/orderhold.grpc.pb.h"

ABSL_FLAG(std::string, grpc_address, "127.0.0.1:0", "Where to listen (host:port).");

namespace {

class BareService final : public orderhold::v1::OrderHold::CallbackService {
 public:
  grpc::ServerUnaryReactor* PlaceHold(grpc::CallbackServerContext* context,
                                      const orderhold::v1::PlaceHoldRequest* request,
                                      orderhold::v1::PlaceHoldResponse* response) override {
    response->mutable_hold()->set_user_id(request->user_id());
    response->mutable_hold()->set_order_id(request->order_id());
    response->set_created(true);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("A bare gRPC callback server answering PlaceHold (benchmarks).");
  absl::ParseCommandLine(argc, argv);
  // Blocked before gRPC starts its threads, so they inherit the mask and sigwait gets them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  BareService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_grpc_address), grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "orderhold-bare-server: cannot listen on %s\n",
                 absl::GetFlag(FLAGS_grpc_address).c_str());
    return 1;
  }
  std::fprintf(stderr, "orderhold-bare-server: listening on port %d\n", port);
  int signal = 0;
  sigwait(&signals, &signal);
  server->Shutdown();
  return 0;
}
