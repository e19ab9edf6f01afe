// Files cpullm writes, made so that nobody else can redirect them. Another local user may have
// planted a symlink where an output goes (a shared /tmp, a predictable name): opening the path
// with fopen("wb") would then overwrite whatever the link points at. So the bytes go to a new
// file created next to the destination with O_CREAT|O_EXCL|O_NOFOLLOW under a random name, and
// rename() puts it in place once complete. rename() replaces a planted link instead of following
// it, and an interrupted write leaves the destination as it was and no partial file behind.
#pragma once
#include <cstddef>
#include <string>

namespace cpullm {

class OutputFile {
 public:
  explicit OutputFile(std::string path);  // creates the temporary file next to `path`
  ~OutputFile();                          // removes the temporary file unless commit() ran
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, std::size_t size);
  // Closes the temporary file and renames it onto the destination.
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;       // the destination
  std::string temporary_;  // "<path>.<random>.partial", in the destination's folder
  int fd_ = -1;            // open on temporary_ until commit()
};

// A new folder only this user can enter, made by mkdtemp under $TMPDIR (or /tmp): the name is
// unpredictable and the folder cannot exist before, so nothing can be planted in it.
std::string make_private_temporary_folder(const std::string& prefix);

}  // namespace cpullm
