#include "doctor/host_view.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <fstream>

#include "primitives/memory_region.h"

namespace caf_rdma::doctor {

HostView HostView::of_this_host() {
  HostView view;
  utsname un{};
  if (::uname(&un) == 0)
    view.kernel_release = un.release;
  rlimit lim{};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) == 0)
    view.memlock_limit = lim.rlim_cur;
  view.has_ipc_lock = caf_rdma::has_ipc_lock();
  auto list = DeviceList::get();
  if (list.ok())
    view.devices = list->describe();
  else
    view.devices_error = list.error().message();
  return view;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line))
    return "";
  return line;
}

std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> out;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr)
    return out;
  while (dirent* e = ::readdir(dir)) {  // NOLINT(concurrency-mt-unsafe): one thread, own DIR
    std::string name = e->d_name;
    if (name != "." && name != "..")
      out.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace caf_rdma::doctor
