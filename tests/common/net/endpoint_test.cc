// The one reader of aggregator addresses (common/net/endpoint.h): every form
// people paste, the errors for the rest, and --host/--port together.
#include "common/net/endpoint.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fieldprof {
namespace {

struct Case {
  std::string text, host;
  uint16_t port;
};

TEST(EndpointTest, ReadsEveryFormPeoplePaste) {
  for (const Case& c : std::vector<Case>{
           {"agg.example", "agg.example", 0},
           {"agg.example:9443", "agg.example", 9443},
           {"127.0.0.1", "127.0.0.1", 0},
           {"127.0.0.1:18443", "127.0.0.1", 18443},
           {"::1", "::1", 0},
           {"[::1]", "::1", 0},
           {"[::1]:18443", "::1", 18443},
           {"[2001:db8::7]:443", "2001:db8::7", 443},
           {"https://agg.example", "agg.example", 0},
           {"https://agg.example/", "agg.example", 0},
           {"HTTPS://agg.example:9443/", "agg.example", 9443},
           {"https://[::1]:18443/", "::1", 18443},
           {"  agg_1.example  ", "agg_1.example", 0},
       }) {
    StatusOr<Endpoint> e = ParseEndpoint(c.text);
    ASSERT_TRUE(e.ok()) << c.text << ": " << e.status().ToString();
    EXPECT_EQ(e->host, c.host) << c.text;
    EXPECT_EQ(e->port, c.port) << c.text;
  }
}

TEST(EndpointTest, RefusesWhatIsNotAnAggregatorAddress) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"http://agg.example", "HTTPS only"},
      {"ftp://agg.example", "only https://"},
      {"https://agg.example/v1/apis", "without a path"},
      {"agg.example:", "without a port"},
      {"agg.example:0", "out of range"},
      {"agg.example:65536", "out of range"},
      {"agg.example:https", "not a number"},
      {"[::1", "without ']'"},
      {"[::1]x", "after ']'"},
      {"[agg.example]:1", "not an IPv6 address"},
      {"https://::1", "[ADDRESS]:PORT"},
      {"1:2:3", "[ADDRESS]:PORT"},
      {"user@agg.example", "user name"},
      {"agg example", "not a host name"},
      {"", "no host name"},
      {":8443", "no host name"},
  };
  for (const auto& [text, why] : bad) {
    StatusOr<Endpoint> e = ParseEndpoint(text);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.status().message().find(why), std::string::npos)
        << text << ": " << e.status().message();
  }
}

TEST(EndpointTest, HostAndPortFlagsAgreeOrTheErrorNamesBoth) {
  auto parse = [](std::vector<const char*> args, std::string* host, int64_t* port) {
    OptionTable t("prog", "");
    t.AddString("host", host, "");
    t.AddInt("port", port, "", 1, 65535);
    AddEndpointCheck(t, "host", host, "port", port);
    args.insert(args.begin(), "prog");
    return t.Parse(static_cast<int>(args.size()), args.data());
  };
  std::string host;
  int64_t port = 8443;
  ASSERT_TRUE(parse({"--host", "127.0.0.1:18443"}, &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 18443);
  host.clear(), port = 8443;
  ASSERT_TRUE(parse({"--host", "agg.example"}, &host, &port).ok());
  EXPECT_EQ(host, "agg.example");
  EXPECT_EQ(port, 8443);
  host.clear(), port = 8443;
  ASSERT_TRUE(parse({"--host", "https://[::1]:9443/", "--port", "9443"}, &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 9443);
  host.clear(), port = 8443;
  const Status twice = parse({"--host", "agg.example:9443", "--port", "8443"}, &host, &port);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("9443 in --host agg.example:9443 and 8443 in --port"),
            std::string::npos)
      << twice.message();
  host.clear(), port = 8443;
  const Status plain = parse({"--host", "http://agg.example"}, &host, &port);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.message().find("--host: 'http://agg.example'"), std::string::npos)
      << plain.message();
}

TEST(EndpointTest, AnIPv6AddressIsBracketedWithItsPort) {
  EXPECT_EQ(FormatHostPort("::1", 8443), "[::1]:8443");
  EXPECT_EQ(FormatHostPort("agg.example", 8443), "agg.example:8443");
  EXPECT_TRUE(IsAddressLiteral("127.0.0.1"));
  EXPECT_TRUE(IsAddressLiteral("::1"));
  EXPECT_FALSE(IsAddressLiteral("localhost"));
}

}  // namespace
}  // namespace fieldprof
